#!/usr/bin/env python3
"""Renders a Helm chart's templates without Helm, for tests on machines that have no `helm`.

An interpreter for the part of Go's text/template and Helm's functions that charts/goodput
uses (actions with whitespace trimming, if/else/range/with/define/include, variables,
pipelines, and the functions listed in FUNCS), with two checks Helm only makes with --strict:
every `.Values` path a template names must be defined in values.yaml (textually, and again
when rendering: reading a missing key is an error), and every rendered document must parse
as YAML. Anything outside the subset is an error naming the template, never a guess.

    render_chart.py CHART_DIR OUT_DIR [-f VALUES.yaml ...] [--release NAME]

writes OUT_DIR/<template>.yaml per template (multi-document), OUT_DIR/manifest.json (every
document as JSON) and OUT_DIR/config/<key> for each ConfigMap data entry. Exit code 0 when
everything rendered and parsed, 1 otherwise with the reasons on stderr.
"""

import argparse
import copy
import hashlib
import json
import os
import re
import sys

import yaml


class TemplateError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Lexing: text and {{ actions }} with trim markers and comments.

ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)


def lex(source, name):
    """Yields ('text', str) and ('action', str) tokens, trims applied."""
    tokens = []
    pos = 0
    for m in ACTION.finditer(source):
        text = source[pos:m.start()]
        if m.group(1):
            text = text.rstrip(" \t\r\n")
        tokens.append(["text", text])
        body = m.group(2).strip()
        trim_right = bool(m.group(3))
        if not (body.startswith("/*") and body.endswith("*/")):
            tokens.append(["action", body])
        tokens.append(["trim", trim_right])
        pos = m.end()
    tokens.append(["text", source[pos:]])
    # Apply right trims to the following text.
    out = []
    trim_next = False
    for kind, value in tokens:
        if kind == "trim":
            trim_next = value
            continue
        if kind == "text":
            if trim_next:
                value = value.lstrip(" \t\r\n")
            trim_next = False
            if value:
                out.append(("text", value))
        else:
            trim_next = False
            out.append(("action", value))
    return out


# ---------------------------------------------------------------------------------------------
# Parsing actions into a tree.

TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<num>-?\d+(?:\.\d+)?)'
    r"|(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)|(?P<field>(?:\.[A-Za-z0-9_]+)+|\.)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>:=|=|\||\(|\)|,))")


def tokenize(expr, where):
    pos = 0
    out = []
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise TemplateError(f"{where}: cannot read '{expr[pos:]}' in '{expr}'")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
        # A field access right after ')' or a variable is a chained field: not supported.
    return out


class Parser:
    def __init__(self, tokens, where):
        self.t = tokens
        self.i = 0
        self.where = where

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def pipeline(self):
        cmds = [self.command()]
        while self.peek() == ("op", "|"):
            self.next()
            cmds.append(self.command())
        return ("pipe", cmds)

    def command(self):
        args = []
        while True:
            kind, value = self.peek()
            if kind is None or (kind == "op" and value in ("|", ")", ",")):
                break
            args.append(self.operand())
        if not args:
            raise TemplateError(f"{self.where}: empty command")
        return args

    def operand(self):
        kind, value = self.next()
        if kind == "str":
            return ("lit", json.loads(value))
        if kind == "raw":
            return ("lit", value[1:-1])
        if kind == "num":
            return ("lit", float(value) if "." in value else int(value))
        if kind == "var":
            name, _, path = value.partition(".")
            return ("var", name, path.split(".") if path else [])
        if kind == "field":
            return ("field", [p for p in value.split(".") if p])
        if kind == "ident":
            if value in ("true", "false"):
                return ("lit", value == "true")
            if value == "nil":
                return ("lit", None)
            return ("fn", value)
        if (kind, value) == ("op", "("):
            p = self.pipeline()
            if self.next() != ("op", ")"):
                raise TemplateError(f"{self.where}: missing ')'")
            return ("sub", p)
        raise TemplateError(f"{self.where}: unexpected '{value}'")


def parse_expr(expr, where):
    """Parses 'PIPELINE', '$x := PIPELINE' or '$i, $v := PIPELINE'."""
    toks = tokenize(expr, where)
    decl = []
    if len(toks) >= 2 and toks[0][0] == "var" and toks[1] in (("op", ":="), ("op", "=")):
        # "=" assigns to a variable declared in an enclosing scope; marked with a leading "=".
        decl = [toks[0][1] if toks[1][1] == ":=" else "=" + toks[0][1]]
        toks = toks[2:]
    elif (len(toks) >= 4 and toks[0][0] == "var" and toks[1] == ("op", ",")
          and toks[2][0] == "var" and toks[3] == ("op", ":=")):
        decl = [toks[0][1], toks[2][1]]
        toks = toks[4:]
    p = Parser(toks, where)
    pipe = p.pipeline()
    if p.i != len(toks):
        raise TemplateError(f"{where}: trailing '{toks[p.i][1]}' in '{expr}'")
    return decl, pipe


def build_tree(tokens, name):
    """Nested nodes: ('text', s) ('out', decl, pipe) ('if', [(pipe, body)...], else_body)
    ('range', decl, pipe, body, else) ('with', pipe, body, else) ('define', name, body)
    ('template', name, pipe)."""
    pos = 0

    def block(stop):
        nonlocal pos
        body = []
        while pos < len(tokens):
            kind, value = tokens[pos]
            pos += 1
            if kind == "text":
                body.append(("text", value))
                continue
            word = value.split(None, 1)[0] if value else ""
            rest = value[len(word):].strip()
            where = f"{name}: {{{{ {value} }}}}"
            if word in ("end", "else"):
                if word not in stop:
                    raise TemplateError(f"{where}: unexpected {word}")
                return body, word, rest
            if word == "if":
                branches = [(parse_expr(rest, where)[1], None)]
                inner, ended, tail = block(("end", "else"))
                branches[-1] = (branches[-1][0], inner)
                else_body = []
                while ended == "else":
                    if tail.startswith("if "):
                        branches.append((parse_expr(tail[3:], where)[1], None))
                        inner, ended, tail = block(("end", "else"))
                        branches[-1] = (branches[-1][0], inner)
                    else:
                        else_body, ended, tail = block(("end",))
                body.append(("if", branches, else_body))
            elif word in ("range", "with"):
                decl, pipe = parse_expr(rest, where)
                inner, ended, _ = block(("end", "else"))
                else_body = []
                if ended == "else":
                    else_body, _, _ = block(("end",))
                if word == "range":
                    body.append(("range", decl, pipe, inner, else_body))
                else:
                    body.append(("with", pipe, inner, else_body))
            elif word == "define":
                tname = json.loads(rest)
                inner, _, _ = block(("end",))
                body.append(("define", tname, inner))
            elif word == "template":
                m = re.match(r'("(?:[^"\\]|\\.)*")\s*(.*)', rest)
                if not m:
                    raise TemplateError(f"{where}: template needs a quoted name")
                pipe = parse_expr(m.group(2), where)[1] if m.group(2) else None
                body.append(("template", json.loads(m.group(1)), pipe))
            elif word in ("block", "break", "continue"):
                raise TemplateError(f"{where}: '{word}' is outside the supported subset")
            else:
                decl, pipe = parse_expr(value, where)
                body.append(("out", decl, pipe))
        if stop:
            raise TemplateError(f"{name}: missing {{{{ end }}}}")
        return body, None, ""

    body, _, _ = block(())
    return body


# ---------------------------------------------------------------------------------------------
# Values and functions.

class Missing:
    """A key that does not exist (Go prints it as <no value>)."""


def truthy(v):
    if v is None or v is Missing:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return v != 0
    if isinstance(v, (str, list, dict, tuple)):
        return len(v) > 0
    return True


def go_str(v):
    if v is None or v is Missing:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_str(x)}" for k, x in sorted(v.items())) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_str(x) for x in v) + "]"
    return str(v)


def to_yaml(v):
    if v is None or v is Missing:
        return "null"
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True).rstrip("\n")


def go_printf(fmt, *args):
    out = []
    it = iter(args)
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        a = next(it)
        if verb in "sv":
            out.append(go_str(a))
        elif verb == "d":
            out.append(str(int(a)))
        elif verb == "q":
            out.append(json.dumps(go_str(a)))
        else:
            raise TemplateError(f"printf: verb %{verb} is outside the supported subset")
    return "".join(out)


def num(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        try:
            return int(v)
        except (TypeError, ValueError):
            raise TemplateError(f"not a number: {v!r}")
    return v


FUNCS = {
    "quote": lambda *a: " ".join(json.dumps(go_str(x)) for x in a),
    "squote": lambda *a: " ".join("'" + go_str(x) + "'" for x in a),
    "toYaml": to_yaml,
    "fromYaml": lambda s: yaml.safe_load(go_str(s)) or {},
    "toJson": lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")),
    "indent": lambda n, s: "\n".join(" " * n + line for line in go_str(s).split("\n")),
    "nindent": lambda n, s: "\n" + "\n".join(" " * n + line for line in go_str(s).split("\n")),
    "trim": lambda s: go_str(s).strip(),
    "trimSuffix": lambda suf, s: go_str(s)[: -len(suf)] if suf and go_str(s).endswith(suf) else go_str(s),
    "trimPrefix": lambda pre, s: go_str(s)[len(pre):] if go_str(s).startswith(pre) else go_str(s),
    "trunc": lambda n, s: go_str(s)[:n] if n >= 0 else go_str(s)[n:],
    "upper": lambda s: go_str(s).upper(),
    "lower": lambda s: go_str(s).lower(),
    "replace": lambda old, new, s: go_str(s).replace(old, new),
    "contains": lambda sub, s: sub in go_str(s),
    "hasPrefix": lambda pre, s: go_str(s).startswith(pre),
    "printf": go_printf,
    "print": lambda *a: "".join(go_str(x) for x in a),
    "toString": go_str,
    "int": lambda v: int(num(v)),
    "add": lambda *a: sum(num(x) for x in a),
    "sub": lambda a, b: num(a) - num(b),
    "mul": lambda *a: __import__("functools").reduce(lambda x, y: x * y, (num(x) for x in a), 1),
    "max": lambda *a: max(num(x) for x in a),
    "not": lambda v: not truthy(v),
    "and": lambda *a: next((x for x in a if not truthy(x)), a[-1]),
    "or": lambda *a: next((x for x in a if truthy(x)), a[-1]),
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: num(a) < num(b),
    "le": lambda a, b: num(a) <= num(b),
    "gt": lambda a, b: num(a) > num(b),
    "ge": lambda a, b: num(a) >= num(b),
    "empty": lambda v: not truthy(v),
    "default": lambda d, *v: v[0] if v and truthy(v[0]) else d,
    "list": lambda *a: list(a),
    "dict": lambda *a: {go_str(a[i]): a[i + 1] for i in range(0, len(a), 2)},
    "first": lambda l: l[0] if l else None,
    "len": lambda v: len(v),
    "hasKey": lambda d, k: k in d,
    "sha256sum": lambda s: hashlib.sha256(go_str(s).encode()).hexdigest(),
    "b64enc": lambda s: __import__("base64").b64encode(go_str(s).encode()).decode(),
    "join": lambda sep, l: sep.join(go_str(x) for x in l),
}


# ---------------------------------------------------------------------------------------------
# Evaluation.

class Scope:
    """Variables of one block; lookups and assignments walk out to the enclosing blocks."""

    def __init__(self, parent=None, **names):
        self.parent = parent
        self.names = dict(names)

    def __contains__(self, name):
        return name in self.names or (self.parent is not None and name in self.parent)

    def __getitem__(self, name):
        if name in self.names:
            return self.names[name]
        return self.parent[name]

    def declare(self, name, value):
        self.names[name] = value

    def assign(self, name, value):
        s = self
        while s is not None and name not in s.names:
            s = s.parent
        if s is None:
            raise KeyError(name)
        s.names[name] = value


class Renderer:
    def __init__(self, templates, strict_roots):
        self.templates = templates  # name -> tree
        self.strict_roots = strict_roots  # ids of dicts where a missing key is an error
        self.depth = 0

    def field(self, value, path, where):
        for part in path:
            if isinstance(value, dict):
                if part not in value:
                    if id(value) in self.strict_roots:
                        raise TemplateError(f"{where}: .{'.'.join(path)}: key '{part}' is not "
                                            "defined in values.yaml")
                    value = Missing
                    continue
                value = value[part]
            elif value is Missing or value is None:
                value = Missing
            else:
                raise TemplateError(f"{where}: cannot read field '{part}' of {type(value).__name__}")
        return value

    def call(self, name, args, dot, scope, where):
        if name == "include":
            if len(args) != 2:
                raise TemplateError(f"{where}: include takes a name and a value")
            return self.execute(go_str(args[0]), args[1], where)
        if name == "required":
            if not truthy(args[1]):
                raise TemplateError(f"{where}: required: {args[0]}")
            return args[1]
        if name == "index":
            v = args[0]
            for k in args[1:]:
                if isinstance(v, dict):
                    if k not in v and id(v) in self.strict_roots:
                        raise TemplateError(f"{where}: index: key '{k}' is not defined in "
                                            "values.yaml")
                    v = v.get(k, Missing)
                else:
                    v = v[int(k)]
            return v
        if name not in FUNCS:
            raise TemplateError(f"{where}: function '{name}' is outside the supported subset")
        try:
            return FUNCS[name](*args)
        except TemplateError:
            raise
        except Exception as e:  # a wrong argument count or type
            raise TemplateError(f"{where}: {name}: {e}")

    def arg(self, node, dot, scope, where):
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "field":
            return self.field(dot, node[1], where)
        if kind == "var":
            if node[1] not in scope:
                raise TemplateError(f"{where}: undefined variable {node[1]}")
            return self.field(scope[node[1]], node[2], where)
        if kind == "sub":
            return self.pipe(node[1], dot, scope, where)
        if kind == "fn":
            return self.call(node[1], [], dot, scope, where)
        raise TemplateError(f"{where}: bad operand")

    def pipe(self, pipe, dot, scope, where):
        value = Missing
        first = True
        for cmd in pipe[1]:
            head = cmd[0]
            if head[0] == "fn":
                args = [self.arg(a, dot, scope, where) for a in cmd[1:]]
                if not first:
                    args.append(value)
                value = self.call(head[1], args, dot, scope, where)
            else:
                if len(cmd) != 1 or not first:
                    raise TemplateError(f"{where}: a value cannot take arguments")
                value = self.arg(head, dot, scope, where)
            first = False
        return value

    def run(self, nodes, dot, scope, out, where):
        for node in nodes:
            kind = node[0]
            if kind == "text":
                out.append(node[1])
            elif kind == "out":
                decl, pipe = node[1], node[2]
                value = self.pipe(pipe, dot, scope, where)
                if decl and decl[0].startswith("="):
                    if decl[0][1:] not in scope:
                        raise TemplateError(f"{where}: assignment to undeclared {decl[0][1:]}")
                    scope.assign(decl[0][1:], value)
                elif decl:
                    scope.declare(decl[0], value)
                else:
                    out.append(go_str(value))
            elif kind == "if":
                for cond, body in node[1]:
                    if truthy(self.pipe(cond, dot, scope, where)):
                        self.run(body, dot, Scope(scope), out, where)
                        break
                else:
                    self.run(node[2], dot, Scope(scope), out, where)
            elif kind == "with":
                value = self.pipe(node[1], dot, scope, where)
                if truthy(value):
                    self.run(node[2], value, Scope(scope), out, where)
                else:
                    self.run(node[3], dot, Scope(scope), out, where)
            elif kind == "range":
                decl, pipe, body, else_body = node[1], node[2], node[3], node[4]
                value = self.pipe(pipe, dot, scope, where)
                if isinstance(value, dict):
                    items = sorted(value.items())
                elif isinstance(value, list):
                    items = list(enumerate(value))
                elif not truthy(value):
                    items = []
                else:
                    raise TemplateError(f"{where}: range over {type(value).__name__}")
                if not items:
                    self.run(else_body, dot, Scope(scope), out, where)
                for key, item in items:
                    inner = Scope(scope)
                    if len(decl) == 1:
                        inner.declare(decl[0], item)
                    elif len(decl) == 2:
                        inner.declare(decl[0], key)
                        inner.declare(decl[1], item)
                    self.run(body, item, inner, out, where)
            elif kind == "define":
                pass  # collected before rendering
            elif kind == "template":
                arg = self.pipe(node[2], dot, scope, where) if node[2] else None
                out.append(self.execute(node[1], arg, where))

    def execute(self, name, dot, where):
        if name not in self.templates:
            raise TemplateError(f"{where}: no template named '{name}'")
        self.depth += 1
        if self.depth > 50:
            raise TemplateError(f"{where}: templates include each other too deeply")
        out = []
        self.run(self.templates[name], dot, Scope(**{"$": dot}), out, name)
        self.depth -= 1
        return "".join(out)


def collect_defines(nodes, into):
    for node in nodes:
        if node[0] == "define":
            into[node[1]] = node[2]
            collect_defines(node[2], into)
        elif node[0] == "if":
            for _, body in node[1]:
                collect_defines(body, into)
            collect_defines(node[2], into)
        elif node[0] in ("range",):
            collect_defines(node[3], into)


def merge(base, override):
    for k, v in override.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def values_paths_defined(values, path):
    v = values
    for part in path:
        if not isinstance(v, dict) or part not in v:
            return False
        v = v[part]
    return True


VALUES_REF = re.compile(r"\.Values((?:\.[A-Za-z0-9_]+)+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chart")
    ap.add_argument("out")
    ap.add_argument("-f", "--values", action="append", default=[])
    ap.add_argument("--release", default="goodput")
    ap.add_argument("--namespace", default="default")
    opts = ap.parse_args()

    errors = []
    with open(os.path.join(opts.chart, "Chart.yaml")) as f:
        chart = yaml.safe_load(f)
    with open(os.path.join(opts.chart, "values.yaml")) as f:
        defaults = yaml.safe_load(f) or {}
    values = copy.deepcopy(defaults)
    for path in opts.values:
        with open(path) as f:
            override = yaml.safe_load(f) or {}
        # An override may only set keys the chart knows (a typo would be silently ignored);
        # a map that is empty in values.yaml (a service's `config: {}`) takes any keys.
        def check(o, d, prefix):
            if isinstance(d, dict) and not d:
                return
            for k, v in o.items():
                if not isinstance(d, dict) or k not in d:
                    errors.append(f"{path}: {prefix}{k} is not a value of the chart")
                elif isinstance(v, dict) and isinstance(d[k], dict):
                    check(v, d[k], f"{prefix}{k}.")
        check(override, defaults, "")
        merge(values, override)

    tdir = os.path.join(opts.chart, "templates")
    sources = {}
    for fname in sorted(os.listdir(tdir)):
        if fname.endswith((".yaml", ".tpl", ".yml")):
            with open(os.path.join(tdir, fname)) as f:
                sources[f"{chart['name']}/templates/{fname}"] = f.read()

    # Every .Values path named in a template must exist in values.yaml.
    for name, src in sources.items():
        for m in VALUES_REF.finditer(src):
            path = m.group(1).strip(".").split(".")
            if not values_paths_defined(defaults, path):
                line = src[: m.start()].count("\n") + 1
                errors.append(f"{name}:{line}: .Values.{'.'.join(path)} is not defined in "
                              "values.yaml")

    templates = {}
    trees = {}
    for name, src in sources.items():
        try:
            tree = build_tree(lex(src, name), name)
        except TemplateError as e:
            errors.append(str(e))
            continue
        trees[name] = tree
        templates[name] = tree
        collect_defines(tree, templates)

    top = {
        "Values": values,
        "Release": {"Name": opts.release, "Namespace": opts.namespace, "Service": "Helm",
                    "IsInstall": True, "IsUpgrade": False, "Revision": 1},
        "Chart": {"Name": chart["name"], "Version": chart["version"],
                  "AppVersion": chart.get("appVersion", ""), "Description": chart.get("description", "")},
        "Capabilities": {"KubeVersion": {"Version": "v1.29.0", "Major": "1", "Minor": "29"}},
    }
    strict = set()

    def mark(d):
        if isinstance(d, dict):
            strict.add(id(d))
            for v in d.values():
                mark(v)
    mark(values)
    renderer = Renderer(templates, strict)

    os.makedirs(os.path.join(opts.out, "config"), exist_ok=True)
    manifest = []
    for name, tree in trees.items():
        base = os.path.basename(name)
        if base.startswith("_"):
            continue
        top["Template"] = {"Name": name, "BasePath": f"{chart['name']}/templates"}
        try:
            text = renderer.execute(name, top, name)
        except TemplateError as e:
            errors.append(str(e))
            continue
        with open(os.path.join(opts.out, base), "w") as f:
            f.write(text)
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as e:
            errors.append(f"{name}: rendered output is not YAML: {e}")
            continue
        for doc in docs:
            if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                errors.append(f"{name}: a rendered document has no kind/apiVersion: {doc!r:.200}")
                continue
            manifest.append({"template": name, "object": doc})
            if doc["kind"] == "ConfigMap":
                for key, data in (doc.get("data") or {}).items():
                    try:
                        yaml.safe_load(data)
                    except yaml.YAMLError as e:
                        errors.append(f"{name}: ConfigMap key {key} is not YAML: {e}")
                    with open(os.path.join(opts.out, "config", key), "w") as f:
                        f.write(data)
    with open(os.path.join(opts.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    if errors:
        for e in errors:
            print(f"render_chart: {e}", file=sys.stderr)
        return 1
    kinds = sorted(f"{m['object']['kind']}/{m['object']['metadata']['name']}" for m in manifest)
    print(f"rendered {len(manifest)} objects: {', '.join(kinds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
