//! logpolicy
pub mod clock;
mod level;
pub mod policy;
pub use level::{Level, ParseLevelError};
pub use policy::{
    DirectiveError, Directives, EffectivePolicy, Policy, PolicyError, PolicyLayer, Target,
};
