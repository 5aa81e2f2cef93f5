mod client;
mod pins;
mod smoke {}
mod vet;
