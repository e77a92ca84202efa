"""checkov over the chart and the examples users copy, offline; fails on any finding
that the chart README does not list as an exception.

Run through `scripts/checkov`, which provides the virtualenv:

    scripts/checkov [--set K=V]... [--set-string K=V]... [-f values.yaml]...
                    [--exceptions README.md] [PATH]...

Scanned, each in a checkov run of its own (`--framework kubernetes`; a graph check such
as "a NetworkPolicy for every pod" would otherwise match one scan's pods with another
scan's policies):
  defaults     the chart rendered with its default values,
  all options  the chart rendered with ci/all-options-values.yaml (every option on),
  examples     the YAML files of each PATH (default: e2e/examples/),
the extra values, if any, applied to both renders (release `logpolicy-operator` in the
namespace `logpolicy-system`, as the README installs it).

The exceptions are the table under "## Scanners (checkov)" in the chart's README.md
(or the file given with --exceptions, to try a change to the table): a
failed check (or one skipped by an inline `checkov.io/skip` annotation) passes only if
a row names its check, its object and the scan it was found in. Without extra values or
paths, an exception that no scan needs any more is an error too, so the table stays
true. Exit status 0: no finding beyond the table; 1: findings (listed); 2: the scan
could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "logpolicy-operator"
README = CHART / "README.md"
ALL_OPTIONS = CHART / "ci" / "all-options-values.yaml"
EXAMPLES = ROOT / "e2e" / "examples"
RELEASE = "logpolicy-operator"
NAMESPACE = "logpolicy-system"
HEADING = "## Scanners (checkov)"

# The scans: the README's names, and the folder each is written to for checkov.
SCANS = {"defaults": "defaults", "all options": "all-options", "examples": "examples"}


class ScanError(Exception):
    pass


@dataclass(frozen=True)
class Excepted:
    """One row of the README's table: `check` on `kind name` in `scans`."""

    check: str
    kind: str
    name: str
    scans: frozenset[str]
    line: int

    def covers(self, f: Finding) -> bool:
        return (
            f.check == self.check
            and f.kind == self.kind
            and f.name == self.name
            and f.scan in self.scans
        )


@dataclass(frozen=True)
class Finding:
    check: str
    title: str
    kind: str
    name: str
    scan: str
    file: str
    how: str  # "failed", or "skipped" by an inline annotation

    def __str__(self) -> str:
        return (
            f"{self.check} {self.title!r} {self.how}: {self.kind} {self.name} "
            f"({self.scan}: {self.file})"
        )


CHECK_ID = re.compile(r"`(CKV2?_K8S_[0-9]+)`")
OBJECT = re.compile(r"`([A-Z][A-Za-z]+) ([a-z0-9][-a-z0-9.]*)`")


def read_exceptions(readme: Path = README) -> list[Excepted]:
    """The rows of the table under HEADING: | check | object | scans | why |."""
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError as e:
        raise ScanError(f"{readme}: {e.strerror}") from e
    lines = text.splitlines()
    try:
        start = lines.index(HEADING)
    except ValueError:
        raise ScanError(f"{readme}: no heading {HEADING!r}") from None
    rows: list[Excepted] = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("## "):
            break
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "check":
            continue
        where = f"{readme.name}:{number}"
        if len(cells) != 4 or not cells[3]:
            raise ScanError(f"{where}: a row has 4 cells (check | object | scans | why): {line}")
        check = CHECK_ID.search(cells[0])
        obj = OBJECT.fullmatch(cells[1])
        scans = {s.strip() for s in cells[2].split(",")}
        if not check:
            raise ScanError(f"{where}: no check id such as `CKV_K8S_38` in {cells[0]!r}")
        if not obj:
            raise ScanError(f"{where}: the object is `Kind name`, not {cells[1]!r}")
        if not scans <= SCANS.keys():
            unknown = ", ".join(sorted(scans - SCANS.keys()))
            raise ScanError(f"{where}: unknown scan {unknown!r} (one of: {', '.join(SCANS)})")
        rows.append(Excepted(check.group(1), obj.group(1), obj.group(2), frozenset(scans), number))
    if not rows:
        raise ScanError(f"{readme}: no exception rows under {HEADING!r}")
    return rows


def helm_template(values: list[str], out: Path) -> None:
    """scripts/helm template into `out`; `values` are --set/-f arguments."""
    cmd = [str(ROOT / "scripts" / "helm"), "template", RELEASE, str(CHART), "-n", NAMESPACE]
    done = subprocess.run(cmd + values, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ScanError(f"scripts/helm template {' '.join(values)}: {done.stderr.strip()}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(done.stdout, encoding="utf-8")


def copy_examples(paths: list[Path], into: Path) -> int:
    """Copies the YAML files of `paths` (files or folders) into `into`; how many."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml")))
        elif p.is_file():
            files.append(p)
        else:
            raise ScanError(f"{p}: no such file or folder")
    if not files:
        raise ScanError(f"no YAML files in {', '.join(map(str, paths))}")
    into.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(files):
        # The file's name, as reported; a prefix keeps two files of one name apart.
        target = into / f.name
        if target.exists():
            target = into / f"{i}-{f.name}"
        shutil.copyfile(f, target)
    return len(files)


def run_checkov(folder: Path) -> dict:
    """checkov's JSON report of `folder`, run without any network access it can avoid."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BC_", "PRISMA_", "CKV_", "CHECKOV_"))
    }
    # No API key, no platform downloads, no PyPI version check.
    env.update(CKV_SKIP_PACKAGE_UPDATE_CHECK="true", BC_SKIP_MAPPING="TRUE")
    cmd = [
        sys.executable,
        "-c",
        "import sys, warnings; warnings.simplefilter('ignore');"
        "from checkov.main import Checkov; sys.exit(Checkov().run())",
        "--framework",
        "kubernetes",
        "--directory",
        ".",
        "--output",
        "json",
        "--skip-download",
        "--skip-results-upload",
        "--compact",
    ]
    # cwd: the scanned folder, so that no .checkov.yaml of the caller's applies.
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, check=False)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise ScanError(
            f"checkov exited {done.returncode} without a JSON report: "
            f"{done.stderr.strip() or done.stdout.strip()}"
        ) from None
    if isinstance(report, list):  # one entry per framework; one framework asked for
        report = next((r for r in report if r.get("check_type") == "kubernetes"), None)
    if not isinstance(report, dict) or "results" not in report:
        raise ScanError(f"checkov found nothing to scan in {folder}: {done.stdout.strip()[:500]}")
    return report


RESOURCE = re.compile(r"^([A-Za-z]+)\.([^.]*)\.([^.]+)")


def findings(scan: str, report: dict) -> tuple[list[Finding], list[int]]:
    """The failed and inline-skipped checks of one scan, and its [passed, failed] counts."""
    counts = [0, 0]
    found: list[Finding] = []
    results = report["results"]
    for key, how in (
        ("passed_checks", None),
        ("failed_checks", "failed"),
        ("skipped_checks", "skipped"),
    ):
        for r in results.get(key) or []:
            file = r["file_path"].lstrip("/")
            counts[0 if how is None else 1] += 1
            if how is None:
                continue
            m = RESOURCE.match(r["resource"])
            kind, name = (m.group(1), m.group(3)) if m else ("?", r["resource"])
            found.append(Finding(r["check_id"], r["check_name"], kind, name, scan, file, how))
    return found, counts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/checkov", description=__doc__.split("\n")[0])
    parser.add_argument("--set", action="append", default=[], metavar="K=V")
    parser.add_argument("--set-string", action="append", default=[], metavar="K=V")
    parser.add_argument("--values", "-f", action="append", default=[], metavar="FILE")
    parser.add_argument("--exceptions", type=Path, default=README, metavar="README.md",
                        help=f"the file with the table (default: {README.relative_to(ROOT)})")
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="examples to scan (files or folders; default: e2e/examples)")
    args = parser.parse_args(argv)
    extra: list[str] = []
    for f in args.values:
        extra += ["-f", str(Path(f).resolve())]
    for s in args.set:
        extra += ["--set", s]
    for s in args.set_string:
        extra += ["--set-string", s]
    # Extra values or other examples may legitimately leave an exception unused.
    strict_table = not extra and not args.paths

    try:
        exceptions = read_exceptions(args.exceptions)
        with tempfile.TemporaryDirectory(prefix="logpolicy-checkov-") as tmp:
            base = Path(tmp)
            helm_template(extra, base / SCANS["defaults"] / "chart.yaml")
            helm_template(["-f", str(ALL_OPTIONS)] + extra, base / SCANS["all options"] / "chart.yaml")
            n = copy_examples([p.resolve() for p in args.paths] or [EXAMPLES], base / SCANS["examples"])
            found: list[Finding] = []
            counts: dict[str, list[int]] = {}
            for name, folder in SCANS.items():
                report = run_checkov(base / folder)
                if report["summary"].get("parsing_errors"):
                    errors = report["results"].get("parsing_errors") or ["some files"]
                    raise ScanError(f"checkov could not parse ({name}): {', '.join(map(str, errors))}")
                scan_found, counts[name] = findings(name, report)
                found += scan_found
    except ScanError as e:
        print(f"scripts/checkov: {e}", file=sys.stderr)
        return 2

    table = args.exceptions.resolve()
    table = table.relative_to(ROOT) if table.is_relative_to(ROOT) else table
    used: set[Excepted] = set()
    new: list[Finding] = []
    for f in found:
        covering = [e for e in exceptions if e.covers(f)]
        used.update(covering)
        if not covering:
            new.append(f)
    version = report["summary"].get("checkov_version", "?")
    print(f"checkov {version}, --framework kubernetes, offline; exceptions: {table}")
    for name, (passed, failed) in counts.items():
        what = f"{n} file(s)" if name == "examples" else "the chart"
        excepted = sum(1 for f in found if f.scan == name) - sum(1 for f in new if f.scan == name)
        print(f"{name} ({what}): {passed} passed, {failed} failed or skipped, {excepted} of them documented exceptions")
        if passed + failed == 0:
            print(f"scripts/checkov: the {name} scan checked nothing", file=sys.stderr)
            return 2
    for f in found:
        if f not in new:
            print(f"  exception: {f}")
    stale = [e for e in exceptions if e not in used] if strict_table else []
    for f in new:
        print(f"NEW FINDING: {f}")
    for e in stale:
        print(
            f"STALE EXCEPTION: {table}:{e.line}: {e.check} {e.kind} {e.name} "
            f"({', '.join(sorted(e.scans))}) is no longer found: remove the row"
        )
    if new or stale:
        print(
            f"{len(new)} finding(s) beyond the documented exceptions, {len(stale)} stale exception(s): "
            f"fix them, or explain each in the table under {HEADING!r} of {table}"
        )
        return 1
    print("0 findings beyond the documented exceptions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
