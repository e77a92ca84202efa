"""`helm template` and `helm lint`, offline, with the Helm v4 SDK of helm-python-sdk.

Run through `scripts/helm`, which provides the virtualenv:

    scripts/helm template RELEASE CHART --namespace NS [--set k=v]... [-f values.yaml]...
                          [--kube-version v1.20.2] [--api-versions policy/v1beta1]...
    scripts/helm lint [--strict] CHART [--namespace NS] [--set k=v]... [-f values.yaml]...
    scripts/helm package CHART --destination DIR

`template` prints the rendered manifests as `helm template` does (one `# Source:`
document per object, in Helm's install order, NOTES.txt left out); values are checked
against the chart's values.schema.json. `package` writes CHART as `NAME-VERSION.tgz` as
`helm package` does (each file's time is its modification time: set them for a
reproducible archive) and prints its path. Errors go to stderr with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

import helm_python as helm
from helm_python import _native

# Helm's install order (pkg/release/util/kind_sorter.go); other kinds come last.
INSTALL_ORDER = [
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
]

DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)
KIND = re.compile(r"^kind:[ \t]*['\"]?([A-Za-z0-9]+)", re.MULTILINE)


class UsageError(Exception):
    pass


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Deep merge: maps merge, anything else (lists included) is replaced."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def user_values(args: argparse.Namespace) -> dict[str, Any]:
    """-f files first, then each --set / --set-string in order, as helm does."""
    values: dict[str, Any] = {}
    for path in args.values or []:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise UsageError(f"values file {path}: {e.strerror}") from e
        merge(values, helm.values_from_yaml(text) or {})
    for kind, expr in args.sets or []:
        parse = helm.parse_set_string if kind == "set" else helm.parse_set_string_values
        try:
            merge(values, parse(expr))
        except helm.HelmError as e:
            raise UsageError(f"--{kind} {expr}: {e}") from e
    return values


def sort_key(item: tuple[int, str, str]) -> tuple[int, int]:
    index, _source, doc = item
    m = KIND.search(doc)
    kind = m.group(1) if m else ""
    rank = INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)
    return (rank, index)


def template(args: argparse.Namespace) -> int:
    values = user_values(args)
    opts: dict[str, Any] = {
        "name": args.release,
        "namespace": args.namespace,
        "is_install": True,
    }
    if args.kube_version:
        opts["kube_version"] = args.kube_version
    if args.api_versions:
        opts["api_versions"] = args.api_versions
    with helm.Chart.load(args.chart) as chart:
        # The schema is checked by rendering too; checking it first gives its message alone.
        chart.validate_schema(values)
        # Chart.render does not pass kube_version / api_versions, the library takes them.
        rendered: dict[str, str] = json.loads(
            _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(opts))
        )
    docs: list[tuple[int, str, str]] = []
    for source in sorted(rendered):
        if source.endswith("NOTES.txt"):
            continue
        for doc in DOC_SPLIT.split(rendered[source]):
            if doc.strip() and any(
                line.strip() and not line.lstrip().startswith("#") for line in doc.splitlines()
            ):
                docs.append((len(docs), source, doc.strip("\n")))
    out = sys.stdout
    for _index, source, doc in sorted(docs, key=sort_key):
        out.write(f"---\n# Source: {source}\n{doc}\n")
    if args.notes:
        for source in sorted(rendered):
            if source.endswith("NOTES.txt"):
                out.write(f"\nNOTES:\n{rendered[source]}\n")
    return 0


SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def lint(args: argparse.Namespace) -> int:
    values = user_values(args)
    report = helm.lint(
        args.chart,
        values,
        strict=args.strict,
        namespace=args.namespace,
        kube_version=args.kube_version,
    )
    failed = False
    print(f"==> Linting {args.chart}")
    for m in report.get("messages") or []:
        severity = int(m.get("severity", 0))
        print(f"[{SEVERITY.get(severity, severity)}] {m.get('path')}: {m.get('error')}")
        if severity >= 3 or (args.strict and severity >= 2):
            failed = True
    for e in report.get("errors") or []:
        print(f"[ERROR] {e}")
        failed = True
    linted = report.get("total_charts_linted", 0)
    if failed or not linted:
        print(f"Error: {linted} chart(s) linted, 1 chart(s) failed", file=sys.stderr)
        return 1
    print(f"\n{linted} chart(s) linted, 0 chart(s) failed")
    return 0


def package(args: argparse.Namespace) -> int:
    print(helm.package(args.chart, destination=args.destination))
    return 0


class SetAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        sets = getattr(namespace, "sets", None) or []
        sets.append((option_string.lstrip("-"), values))
        namespace.sets = sets


def add_values_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--namespace", "-n", default="default")
    p.add_argument("--set", action=SetAction, dest="sets", metavar="K=V")
    p.add_argument("--set-string", action=SetAction, dest="sets", metavar="K=V")
    p.add_argument("--values", "-f", action="append", metavar="FILE")
    p.add_argument("--kube-version", metavar="VERSION", help="e.g. v1.20.2")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/helm", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("template", help="render a chart like `helm template`")
    t.add_argument("release")
    t.add_argument("chart")
    add_values_args(t)
    t.add_argument("--api-versions", "-a", action="append", metavar="GROUP/VERSION[/KIND]")
    t.add_argument("--notes", action="store_true", help="also print NOTES.txt")
    t.set_defaults(func=template)
    lt = sub.add_parser("lint", help="lint a chart like `helm lint`")
    lt.add_argument("chart")
    lt.add_argument("--strict", action="store_true", help="fail on warnings too")
    add_values_args(lt)
    lt.set_defaults(func=lint)
    pk = sub.add_parser("package", help="package a chart like `helm package`")
    pk.add_argument("chart")
    pk.add_argument("--destination", "-d", default=".", metavar="DIR")
    pk.set_defaults(func=package)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as e:
        print(f"Error: {e}", file=sys.stderr)
    except helm.HelmError as e:
        print(f"Error: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
