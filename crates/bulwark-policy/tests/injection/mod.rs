//! The advisory injection scanner (`bulwark_policy::injection`): its rates
//! on public labelled corpora, and the properties that hold on any input.

mod corpus;
mod html;
mod properties;
