//! Writes the LogPolicy CustomResourceDefinition as YAML to stdout.
fn main() -> Result<(), serde_yaml::Error> {
    print!("{}", logpolicy_api::crd::crd_yaml()?);
    Ok(())
}
