mod server;
mod smoke {}
