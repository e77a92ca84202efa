//! Rendering and linting the Helm chart `charts/logpolicy-operator` offline.
