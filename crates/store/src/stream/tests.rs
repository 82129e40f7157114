//! Unit tests and the model-based property test of the stream.

use super::*;
