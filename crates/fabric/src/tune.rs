//! Online tuner (placeholder).
