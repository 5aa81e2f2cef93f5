//! Properties of the scanner on any input.
