//! Names every kind reads: annotations and labels on the objects users write. Below every
//! other module, so the layers that use them point one way (docs/architecture.md "Modules").

/// The annotation that pauses any of the three kinds (`"true"`).
pub const PAUSE_ANNOTATION: &str = "terdut.ryuvia.com/paused";

/// The one field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "terdut-operator";
