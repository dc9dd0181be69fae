//! skyconv: sky convolution on GPU and CPU. Module tree only; see DESIGN.md.

pub mod backend;
pub mod cube;
pub mod error;
pub mod grid;
pub mod healpix;
mod py;
pub mod real;
pub mod sht;
pub mod smooth;

pub use error::{Error, Result};
