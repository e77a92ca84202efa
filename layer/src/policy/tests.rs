use super::*;
use proptest::prelude::*;
use std::time::{Duration, UNIX_EPOCH};

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn layer(source: &str, priority: i32, d: &str) -> PolicyLayer {
    PolicyLayer::new(source, priority, d.parse().unwrap()).unwrap()
}

#[test]
fn higher_priority_wins_per_target_and_ties_go_to_the_first() {
    let p = Policy::new(vec![
        layer("a", 0, "warn,x=error"),
        layer("b", 5, "x::y=debug"),
        layer("c", 5, "x::y=trace,z=off"),
    ]);
    let e = p.effective_at(t0());
    assert_eq!(e.level_for("x::y::w"), Level::Debug);
    assert_eq!(e.level_for("x::q"), Level::Error);
    assert_eq!(e.level_for("z"), Level::Off);
    assert_eq!(e.level_for("other"), Level::Warn);
    assert_eq!(e.sources, ["b", "c", "a"]);
}

#[test]
fn no_default_anywhere_falls_back_to_info() {
    let p = Policy::new(vec![layer("a", 0, "x=debug")]);
    assert_eq!(p.effective_at(t0()).level_for("y"), FALLBACK_LEVEL);
    assert_eq!(
        Policy::default().effective_at(t0()).level_for("y"),
        FALLBACK_LEVEL
    );
}

#[test]
fn expired_layers_stop_applying_at_their_instant() {
    let p = Policy::new(vec![
        PolicyLayer::baseline("info".parse().unwrap()),
        layer("raise", 1, "debug").expires_at(t0() + Duration::from_secs(10)),
        layer("later", 2, "x=trace").expires_at(t0() + Duration::from_secs(20)),
    ]);
    let e = p.effective_at(t0());
    assert_eq!(e.level_for("y"), Level::Debug);
    assert_eq!(e.next_expiry, Some(t0() + Duration::from_secs(10)));
    let e = p.effective_at(t0() + Duration::from_secs(10));
    assert_eq!(e.level_for("y"), Level::Info);
    assert_eq!(e.level_for("x"), Level::Trace);
    assert_eq!(e.next_expiry, Some(t0() + Duration::from_secs(20)));
    let e = p.effective_at(t0() + Duration::from_secs(25));
    assert_eq!(e.next_expiry, None);
    assert_eq!(e.sources, ["env"]);
}

#[test]
fn json_errors_name_the_field() {
    let e = |s: &str| Policy::from_json(s).unwrap_err().to_string();
    assert!(
        e(r#"{"layers":[{"source":"a","bogus":1}]}"#)
            .starts_with("layers[0].bogus: unknown field `bogus`"),
        "{}",
        e(r#"{"layers":[{"source":"a","bogus":1}]}"#)
    );
    assert_eq!(
        e(r#"{"layers":[{"source":"a"},{"source":"b","expiresAt":"soon"}]}"#),
        r#"layers[1].expiresAt: invalid RFC 3339 timestamp "soon" (expected e.g. "2026-11-29T20:06:15Z")"#
    );
    assert!(
        e(r#"{"layers":[{"source":"a","targets":[{"target":"a b","level":"info"}]}]}"#)
            .starts_with("layers[0].targets[0].target: target \"a b\" contains")
    );
    assert_eq!(
        e(r#"{"layers":[{"source":"a"},{"source":"a"}]}"#),
        r#"layers: duplicate layer source "a""#
    );
    assert_eq!(
        e(r#"{"layers":[{"source":""}]}"#),
        r#"layers[0].source: invalid source "": must be 1 to 256 printable characters"#
    );
    assert_eq!(
        e(
            r#"{"layers":[{"source":"a","targets":[{"target":"x","level":"info"},{"target":"x","level":"warn"}]}]}"#
        ),
        r#"layers[0].targets[1].target: duplicate target "x""#
    );
    assert_eq!(e("nope"), ".: expected ident");
    assert_eq!(
        e(r#"{"layers":[{"source":"a"}"#),
        "layers: EOF while parsing a list"
    );
    assert!(e(r#"{"layers":[{"source":"a","priority":1e99}]}"#)
        .starts_with("layers[0].priority: invalid type"));
}

#[test]
fn upsert_and_remove_by_source() {
    let mut p = Policy::new(vec![PolicyLayer::baseline(Directives::with_default(
        Level::Info,
    ))]);
    p.upsert(layer("ns/a", 1, "debug")).unwrap();
    p.upsert(layer("ns/a", 1, "trace")).unwrap();
    assert_eq!(p.layers().len(), 2);
    assert_eq!(p.effective_at(t0()).level_for("q"), Level::Trace);
    assert!(p.remove("ns/a"));
    assert!(!p.remove("ns/a"));
    assert_eq!(p.effective_at(t0()).level_for("q"), Level::Info);
}

fn arb_target() -> impl Strategy<Value = Target> {
    "[ab](::[ab]){0,3}".prop_map(|s| Target::new(&s).unwrap())
}

fn arb_level() -> impl Strategy<Value = Level> {
    prop::sample::select(Level::ALL.to_vec())
}

fn arb_layer(i: usize) -> impl Strategy<Value = PolicyLayer> {
    (
        -2i32..3,
        prop::option::of(0u64..30),
        prop::option::of(arb_level()),
        prop::collection::vec((arb_target(), arb_level()), 0..5),
    )
        .prop_map(move |(priority, expiry, default_level, targets)| {
            let mut d = Directives {
                default_level,
                ..Directives::default()
            };
            for (t, l) in targets {
                d.set_target(t, l);
            }
            let mut l = PolicyLayer::new(format!("l{i}"), priority, d).unwrap();
            l.expires_at = expiry.map(|s| t0() + Duration::from_secs(s));
            l
        })
}

fn arb_policy() -> impl Strategy<Value = Policy> {
    (0usize..5)
        .prop_flat_map(|n| (0..n).map(arb_layer).collect::<Vec<_>>())
        .prop_map(Policy::new)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    /// The flat table gives every target exactly what per-layer resolution gives it.
    #[test]
    fn flat_table_equals_layered_resolution(p in arb_policy(), at in 0u64..35, target in "[abc](::[abc]){0,4}") {
        let now = t0() + Duration::from_secs(at);
        let mut active: Vec<&PolicyLayer> = p.layers().iter().filter(|l| l.is_active_at(now)).collect();
        active.sort_by_key(|l| std::cmp::Reverse(l.priority));
        let expected = active.iter().find_map(|l| l.directives.level_for(&target)).unwrap_or(FALLBACK_LEVEL);
        prop_assert_eq!(p.effective_at(now).level_for(&target), expected);
    }

    #[test]
    fn json_round_trips(p in arb_policy()) {
        prop_assert_eq!(Policy::from_json(&p.to_json()).unwrap(), p);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(50_000))]

    /// Arbitrary and near-miss JSON: an error or a policy, never a panic.
    #[test]
    fn any_json_parses_or_errors(s in r#"\{"layers":\[\{"source":"[a-z/]{0,3}"(,"(priority|expiresAt|defaultLevel|targets|x)":(-?[0-9e.]{1,12}|"[-0-9a-zT:.Z]{0,25}"|\[\{"target":"[a-z: ]{0,5}","level":"[a-z]{0,6}"\}\]|null|true)){0,4}\}\]\}|\PC{0,30}"#) {
        let _ = Policy::from_json(&s);
    }
}

#[test]
fn sampling_json_errors_name_the_rule() {
    let e = |s: &str| Policy::from_json(s).unwrap_err().to_string();
    let doc =
        |sampling: &str| format!(r#"{{"layers":[{{"source":"a","sampling":[{sampling}]}}]}}"#);
    assert_eq!(
        e(&doc(r#"{"target":"http","keepOneIn":0}"#)),
        "layers[0].sampling[0].keepOneIn: keepOneIn 0 is out of range (1 to 1000000)"
    );
    assert!(e(&doc(r#"{"target":"http","keepOneIn":-3}"#))
        .starts_with("layers[0].sampling[0].keepOneIn: invalid value: integer `-3`"));
    assert_eq!(
        e(&doc(r#"{"target":"http","keepOneIn":10},{"target":"db","keepOneIn":1e12}"#)),
        "layers[0].sampling[1].keepOneIn: invalid type: floating point `1000000000000.0`, expected u64"
    );
    assert!(e(&doc(
        r#"{"target":"http","keepOneIn":10,"scope":"session"}"#
    ))
    .starts_with(
        "layers[0].sampling[0].scope: unknown variant `session`, expected `event` or `request`"
    ));
    assert_eq!(
        e(&doc(r#"{"target":"http","keepOneIn":10,"span":"req"}"#)),
        "layers[0].sampling[0].span: span is only meaningful with scope: request"
    );
    assert_eq!(
        e(r#"{"layers":[{"source":"a","burst":{"perSecond":0,"thenOneIn":2}}]}"#),
        "layers[0].burst.perSecond: perSecond 0 is out of range (1 to 10000000)"
    );
    assert_eq!(
        e(r#"{"layers":[{"source":"a","maxBytesPerSecond":1}]}"#),
        "layers[0].maxBytesPerSecond: maxBytesPerSecond 1 is out of range (1024 to 1099511627776)"
    );
    assert_eq!(
        e(r#"{"layers":[{"source":"a","alwaysKeep":"off"}]}"#),
        "layers[0].alwaysKeep: alwaysKeep cannot be off: errors must always be kept"
    );
    let ok = Policy::from_json(&doc(
        r#"{"target":"http","keepOneIn":10,"scope":"request","span":"handle"}"#,
    ))
    .unwrap();
    assert_eq!(
        ok.layers()[0].directives.to_string(),
        "@sample(http)=1/10:request(handle)"
    );
    assert_eq!(Policy::from_json(&ok.to_json()).unwrap(), ok);
}

#[test]
fn sampling_resolves_per_target_like_levels() {
    let p = Policy::new(vec![
        layer(
            "base",
            0,
            "info,@sample(shop)=1/100,@sample(shop::db)=1/10,@burst=5/s:1/2",
        ),
        layer("raise", 5, "@sample(shop)=1/1,@always_keep=error"),
    ]);
    let e = p.effective_at(t0());
    // The higher layer's rule for shop governs shop::db too: the raise turns sampling off.
    assert_eq!(
        e.directives
            .sampling_for("shop::db::pool")
            .unwrap()
            .keep_one_in
            .get(),
        1
    );
    assert_eq!(e.always_keep(), Level::Error);
    assert_eq!(e.directives.burst.unwrap().per_second.get(), 5);
}

#[test]
fn when_entries_parse_print_and_merge_by_priority() {
    let d: Directives =
        "info, shop::payment=debug@when(user_id=43|42),shop=trace@when(tenant=acme)"
            .parse()
            .unwrap();
    assert_eq!(
        d.to_string(),
        "info,shop::payment=debug@when(user_id=42|43),shop=trace@when(tenant=acme)"
    );
    assert_eq!(d.to_string().parse::<Directives>().unwrap(), d);
    // Unconditional levels are unchanged by them.
    assert_eq!(d.level_for("shop::payment"), Some(Level::Info));

    let p = Policy::new(vec![
        layer("env", 0, "info"),
        layer("a", 1, "shop=debug@when(user_id=42)"),
        layer(
            "b",
            5,
            "shop=trace@when(user_id=42),db=debug@when(user_id=7)",
        ),
    ]);
    let e = p.effective_at(t0());
    assert_eq!(
        e.directives.to_string(),
        "info,shop=trace@when(user_id=42),db=debug@when(user_id=7),@always_keep=warn",
        "the same target and condition in two layers: the higher priority's level"
    );
    assert_eq!(e.level_for("shop"), Level::Info);
}

#[test]
fn bad_when_entries_are_refused_naming_what_is_wrong() {
    let err = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
    assert!(
        err("shop=debug@when(user_id=)").contains("when.equals: no values"),
        "{}",
        err("shop=debug@when(user_id=)")
    );
    let many = (0..17).map(|i| i.to_string()).collect::<Vec<_>>().join("|");
    assert!(err(&format!("shop=debug@when(user_id={many})")).contains("more than 16 values"));
    assert!(err("shop=debug@when(user.id=42)").contains("when.spanField"));
    assert!(err("shop=debug@when(user_id=42").contains("expected target=level@when("));
    assert!(err("debug@when(user_id=42)").contains("names a target"));
    assert!(err("shop=verbose@when(user_id=42)").contains("invalid level"));
    // Span-filter syntax, alone or with a condition: refused as EnvFilter's span filters.
    assert!(err("shop[request{user_id=42}]=debug").contains("span filters are not supported"));
    assert!(err("shop[request]=debug@when(user_id=42)").contains("span filters are not supported"));
}

#[test]
fn a_layer_spec_may_say_when_for_its_targets_and_sampling_only() {
    let spec: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/user-42", "when": {"spanField": "user_id", "equals": ["42", 43]},
            "targets": [{"target": "shop::payment", "level": "debug"}]}"#,
    )
    .unwrap();
    let layer = PolicyLayer::try_from(&spec).unwrap();
    assert_eq!(
        layer.directives.to_string(),
        "shop::payment=debug@when(user_id=42|43)"
    );
    // Back to the spec: the condition is on each target, and reads back the same.
    let back = LayerSpec::from(&layer);
    assert_eq!(back.targets[0].when.as_ref().unwrap().span_field, "user_id");
    assert_eq!(
        PolicyLayer::try_from(&back).unwrap().directives,
        layer.directives
    );

    let bad: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/x", "when": {"spanField": "user id", "equals": []},
            "defaultLevel": "debug", "burst": {"perSecond": 10, "thenOneIn": 10},
            "targets": [{"target": "shop", "level": "debug",
                         "when": {"spanField": "tenant", "equals": ["a"]}}]}"#,
    )
    .unwrap();
    let errors = PolicyLayer::try_from(&bad).unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["when.spanField", "defaultLevel", "burst", "targets[0].when"],
        "{errors}"
    );
    let none: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/x", "targets": [{"target": "shop", "level": "debug",
            "when": {"spanField": "tenant", "equals": []}}]}"#,
    )
    .unwrap();
    let errors = PolicyLayer::try_from(&none).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "targets[0].when.equals: no values: a condition lists the values the field must have"
    );
}

#[test]
fn sampling_under_when_is_per_event_and_reads_back_the_same() {
    let spec: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/user-42", "when": {"spanField": "user_id", "equals": [42]},
            "targets": [{"target": "shop", "level": "debug"}],
            "sampling": [{"target": "shop::db", "keepOneIn": 10}]}"#,
    )
    .unwrap();
    let layer = PolicyLayer::try_from(&spec).unwrap();
    assert_eq!(
        layer.directives.to_string(),
        "shop=debug@when(user_id=42),@sample(shop::db)=1/10@when(user_id=42)"
    );
    assert!(
        layer.directives.sampling.is_empty(),
        "no unconditional rule"
    );
    let back = LayerSpec::from(&layer);
    assert_eq!(
        back.sampling[0].when.as_ref().unwrap().span_field,
        "user_id"
    );
    assert_eq!(
        PolicyLayer::try_from(&back).unwrap().directives,
        layer.directives
    );
    // The text form reads back the same too.
    let text = layer.directives.to_string();
    assert_eq!(text.parse::<Directives>().unwrap(), layer.directives);

    // A sampling entry may carry its own condition (not under the layer's).
    let own: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/x", "sampling": [{"target": "shop", "keepOneIn": 1,
            "when": {"spanField": "tenant", "equals": ["acme"]}}]}"#,
    )
    .unwrap();
    assert_eq!(
        PolicyLayer::try_from(&own).unwrap().directives.to_string(),
        "@sample(shop)=1/1@when(tenant=acme)"
    );

    let bad: LayerSpec = serde_json::from_str(
        r#"{"source": "shop/x", "when": {"spanField": "user_id", "equals": ["42"]},
            "sampling": [{"target": "shop", "keepOneIn": 10, "scope": "request"},
                         {"target": "shop::db", "keepOneIn": 0},
                         {"target": "shop::a", "keepOneIn": 2,
                          "when": {"spanField": "tenant", "equals": ["a"]}}]}"#,
    )
    .unwrap();
    let errors = PolicyLayer::try_from(&bad).unwrap_err();
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "sampling[0].scope",
            "sampling[1].keepOneIn",
            "sampling[2].when"
        ],
        "{errors}"
    );
    assert!(
        errors
            .to_string()
            .contains("sampling is per event only under when"),
        "{errors}"
    );
    let err = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
    assert!(err("@sample(shop)=1/10:request@when(user_id=42)").contains("per event only"));
    assert!(err("@sample(shop)=1/10@when(user_id=)").contains("when.equals: no values"));
    assert!(
        err("@sample(shop)=1/10@when(user_id=42").contains("expected @sample(target)=1/N@when(")
    );
    assert!(err("@burst=10/s:1/2@when(user_id=42)").contains("@when applies to target levels"));
}

#[test]
fn recording_rules_parse_print_and_merge_like_levels() {
    let d: Directives = "info, @record(shop::payment)=debug,@record(shop)=trace"
        .parse()
        .unwrap();
    assert_eq!(
        d.record_level_for("shop::payment::card"),
        Some(Level::Debug)
    );
    assert_eq!(d.record_level_for("shop::cart"), Some(Level::Trace));
    assert_eq!(d.record_level_for("hyper"), None);
    assert_eq!(
        d.to_string(),
        "info,@record(shop::payment)=debug,@record(shop)=trace"
    );
    assert_eq!(d.to_string().parse::<Directives>().unwrap(), d);
    let err = |s: &str| s.parse::<Directives>().unwrap_err().to_string();
    assert_eq!(
        err("@record(shop)=off"),
        r#"invalid setting in directive "@record(shop)=off": a recording rule records down to a level: off records nothing"#
    );
    assert!(
        err("@record(shop)=loud").contains(r#"invalid level "loud""#),
        "{}",
        err("@record(shop)=loud")
    );
    assert!(err("@record(a b)=debug").contains("invalid setting"));

    // A raise's rule wins over the baseline's for the same target; others merge.
    let policy = Policy::new(vec![
        PolicyLayer::baseline(
            "info,@record(shop)=debug,@record(db)=debug"
                .parse()
                .unwrap(),
        ),
        PolicyLayer::new("shop/raise", 5, "@record(shop)=trace".parse().unwrap()).unwrap(),
    ]);
    let e = policy.effective_at(std::time::SystemTime::now());
    assert_eq!(e.directives.record_level_for("shop::x"), Some(Level::Trace));
    assert_eq!(e.directives.record_level_for("db"), Some(Level::Debug));
}

#[test]
fn recording_rules_and_replays_round_trip_through_json_and_name_their_errors() {
    let p = Policy::from_json(
        r#"{"layers":[{"source":"shop/raise","record":[{"target":"shop::payment","level":"debug"}],
            "replay":{"sinceSeconds":300,"id":"uid-1/4"}}]}"#,
    )
    .unwrap();
    let layer = &p.layers()[0];
    assert_eq!(
        layer.directives.record_level_for("shop::payment"),
        Some(Level::Debug)
    );
    let replay = layer.replay.as_ref().unwrap();
    assert_eq!(
        (replay.since.as_secs(), replay.id.as_str()),
        (300, "uid-1/4")
    );
    assert_eq!(Policy::from_json(&p.to_json()).unwrap(), p);

    let err = |json: &str| Policy::from_json(json).unwrap_err().to_string();
    assert_eq!(
        err(r#"{"layers":[{"source":"a/b","record":[{"target":"x","level":"off"}]}]}"#),
        "layers[0].record[0].level: a recording rule records down to a level: off records nothing"
    );
    assert_eq!(
        err(r#"{"layers":[{"source":"a/b","replay":{"sinceSeconds":0,"id":"x"}}]}"#),
        "layers[0].replay.sinceSeconds: 0 is out of range (1 to 86400)"
    );
    assert_eq!(
        err(r#"{"layers":[{"source":"a/b","replay":{"sinceSeconds":60,"id":""}}]}"#),
        "layers[0].replay.id: must be 1 to 128 printable characters"
    );
}
