//! The document parser takes any bytes: arbitrary ones, and near misses of a valid
//! document (a byte changed, dropped or duplicated, a field's value swapped). It returns
//! a document that passes validation or an error; it never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use logpolicy::policy::LayerSpec;
use logpolicy::wire::PolicyDocument;
use logpolicy::PolicyLayer;
use proptest::prelude::*;

const VALID: &str = r#"{"pod":{"namespace":"shop","name":"web-1","uid":"u-1"},"version":7,"issuedAt":"2026-11-29T20:06:15Z","layers":[{"source":"shop/raise","priority":10,"expiresAt":"2026-11-29T20:21:15.5Z","defaultLevel":"info","targets":[{"target":"shop::payment","level":"debug"}],"alwaysKeep":"warn","sampling":[{"target":"shop::http","keepOneIn":100,"scope":"request","span":"request"}],"burst":{"perSecond":1000,"thenOneIn":10},"maxBytesPerSecond":1048576}]}"#;

fn check(bytes: &[u8]) {
    if let Ok(doc) = PolicyDocument::from_json(bytes) {
        // A parsed document is valid all the way down, and round-trips.
        let layers = doc.policy_layers().expect("a parsed document converts");
        assert_eq!(layers.len(), doc.layers.len());
        assert_eq!(
            PolicyDocument::from_json(doc.to_json().as_bytes()).unwrap(),
            doc
        );
        for l in &layers {
            assert_eq!(PolicyLayer::try_from(&LayerSpec::from(l)).unwrap(), *l);
        }
    }
}

fn values() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("null".to_owned()),
        Just("-1".to_owned()),
        Just("0".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("1e999".to_owned()),
        Just("\"verbose\"".to_owned()),
        Just("\"\"".to_owned()),
        Just("\"env\"".to_owned()),
        Just("\"a b\"".to_owned()),
        Just("\"2026-02-30T00:00:00Z\"".to_owned()),
        Just("[]".to_owned()),
        Just("{}".to_owned()),
        Just("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[".to_owned()),
        "\"[^\"\\\\]{0,40}\"",
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn a_byte_changed_dropped_or_doubled(at in 0..VALID.len(), byte in any::<u8>(), op in 0..3u8) {
        let mut b = VALID.as_bytes().to_vec();
        match op {
            0 => b[at] = byte,
            1 => { b.remove(at); }
            _ => b.insert(at, b[at]),
        }
        check(&b);
    }

    #[test]
    fn a_value_swapped(which in 0..64usize, value in values()) {
        // Replace the which-th scalar value (after a ':') with another.
        let starts: Vec<usize> = VALID.match_indices(':').map(|(i, _)| i + 1).collect();
        let start = starts[which % starts.len()];
        let end = VALID[start..].find([',', '}', ']']).map_or(VALID.len(), |e| start + e);
        let mutated = format!("{}{}{}", &VALID[..start], value, &VALID[end..]);
        check(mutated.as_bytes());
    }
}

#[test]
fn the_valid_document_is_valid() {
    let doc = PolicyDocument::from_json(VALID.as_bytes()).unwrap();
    assert_eq!(doc.layers.len(), 1);
    check(VALID.as_bytes());
}
