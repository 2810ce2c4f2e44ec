#!/usr/bin/env python3
"""The Helm chart against its golden manifests.

    golden.py CHART_DIR            compare; exit 1 with the differences
    golden.py CHART_DIR --update   write the golden files anew (then review `git diff`)

Renders the chart (with render_chart.py's interpreter, as `helm template` would) three ways and
compares each with a file under CHART_DIR/ci/golden/:
- default.yaml      the default values: every object, as `helm template` prints it
                    (`# Source:` lines, keys in template order, configs as literal blocks),
                    then NOTES.txt;
- test-values.yaml  the same with ci/test-values.yaml (every optional feature on);
- value-effects.diff  for every value path of the chart (values.yaml and values.schema.json),
                    the override in ci/value-cases.yaml that changes it alone, and what it
                    changes in the default render, object by object ("~ Deployment
                    goodput-ingest" and its changed lines, "+"/"-" for objects that appear or go).
A change to a template, a default or the schema therefore shows, object by object and value by
value, in the golden files' diff of the commit that makes it. It also fails when a value path
has no case in ci/value-cases.yaml (or a case names no value path), when a case changes
nothing, and when any render has errors.
"""

import argparse
import difflib
import os
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import render_chart  # noqa: E402


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, s):
    # Multi-line strings (the services' configs, NOTES) as literal blocks, so a diff shows lines.
    if "\n" in s:
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


_Dumper.add_representer(str, _str)


def objects(manifest, notes):
    """The render as `helm template` prints it, normalized by one YAML writer: an ordered map
    from "Kind name" to the object's text (with its `# Source:` line), then NOTES.txt."""
    out = {}
    for entry in manifest:
        o = entry["object"]
        key = f"{o['kind']} {o.get('metadata', {}).get('name', '')}"
        out[key] = "---\n# Source: " + entry["template"] + "\n" + yaml.dump(
            o, Dumper=_Dumper, sort_keys=False, width=100, default_flow_style=False,
            allow_unicode=True)
    out["NOTES.txt"] = "---\n# NOTES.txt\n" + "".join(
        ("# " + line).rstrip() + "\n" for line in notes.splitlines())
    return out


def render(chart, files, tmp, name):
    out = os.path.join(tmp, name)
    errors, manifest = chart.render(files, "goodput", "default", out)
    with open(os.path.join(out, "NOTES.txt")) as f:
        notes = f.read()
    return errors, objects(manifest, notes)


def diff(a, b, a_name, b_name, context=2):
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), a_name, b_name,
                                        n=context))


def effect(base, changed):
    """What a case changes, object by object: "+ Kind name" (new), "- Kind name" (gone),
    "~ Kind name" with the changed lines and one line of context."""
    out = []
    for key in list(base) + [k for k in changed if k not in base]:
        if key not in changed:
            out.append(f"- {key}\n")
        elif key not in base:
            out.append(f"+ {key}\n")
        elif base[key] != changed[key]:
            d = diff(base[key], changed[key], "", "", context=1).splitlines(True)[2:]
            out.append(f"~ {key}\n" + "".join("  " + line for line in d))
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chart")
    ap.add_argument("--update", action="store_true", help="write the golden files anew")
    opts = ap.parse_args()

    chart = render_chart.Chart(opts.chart, "v1.29.0")
    problems = list(chart.errors)
    ci = os.path.join(opts.chart, "ci")
    with open(os.path.join(ci, "value-cases.yaml")) as f:
        cases = yaml.load(f, Loader=render_chart.StrictLoader) or {}
    paths = render_chart.value_paths(chart.schema, chart.schema, chart.defaults)
    for path in paths:
        if path not in cases:
            problems.append(f"ci/value-cases.yaml: value path {path} has no case")
    for path in cases:
        if path not in paths:
            problems.append(f"ci/value-cases.yaml: {path} is not a value path of the chart")

    golden = {}
    with tempfile.TemporaryDirectory(prefix="chart-golden-") as tmp:
        errors, default = render(chart, [], tmp, "default")
        problems.extend(f"default values: {e}" for e in errors)
        golden["default.yaml"] = "".join(default.values())
        errors, full = render(chart, [os.path.join(ci, "test-values.yaml")], tmp, "test-values")
        problems.extend(f"ci/test-values.yaml: {e}" for e in errors)
        golden["test-values.yaml"] = "".join(full.values())
        effects = []
        for i, path in enumerate(sorted(cases)):
            override = cases[path]
            if not isinstance(override, str):
                problems.append(f"ci/value-cases.yaml: {path}: give the override as a string")
                continue
            file = os.path.join(tmp, f"case{i}.yaml")
            with open(file, "w") as f:
                f.write(override)
            errors, changed = render(chart, [file], tmp, f"case{i}")
            problems.extend(f"ci/value-cases.yaml: {path}: {e}" for e in errors)
            d = effect(default, changed)
            if not d:
                problems.append(f"ci/value-cases.yaml: {path}: the override changes nothing")
            effects.append(f"### {path}\n" + "".join("#   " + line + "\n"
                                                     for line in override.splitlines()) + d)
        golden["value-effects.diff"] = "".join(effects)

    golden_dir = os.path.join(ci, "golden")
    if opts.update:
        os.makedirs(golden_dir, exist_ok=True)
        for name, text in golden.items():
            with open(os.path.join(golden_dir, name), "w") as f:
                f.write(text)
        print(f"wrote {len(golden)} golden files under {golden_dir}")
    else:
        for name, text in golden.items():
            path = os.path.join(golden_dir, name)
            try:
                with open(path) as f:
                    expected = f.read()
            except OSError as e:
                problems.append(f"{path}: {e.strerror}")
                continue
            if expected != text:
                d = diff(expected, text, f"golden/{name}", "rendered")
                lines = d.splitlines(True)
                shown = "".join(lines[:200])
                more = f"... {len(lines) - 200} more lines\n" if len(lines) > 200 else ""
                problems.append(f"{path} differs from the render:\n{shown}{more}")
    if problems:
        for p in problems:
            print(f"golden: {p}", file=sys.stderr)
        if not opts.update:
            print("golden: if the change is intended, run charts/golden.py charts/goodput "
                  "--update and review the golden files' diff", file=sys.stderr)
        return 1
    print(f"chart matches its {len(golden)} golden files ({len(cases)} value cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
