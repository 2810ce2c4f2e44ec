#!/usr/bin/env python3
"""Renders a Helm chart's templates without Helm, for tests on machines that have no `helm`.

An interpreter for Go's text/template (actions with whitespace trimming and comments,
if/else if/else, range with break/continue and else, with/else with/else, define, template,
block, variables, pipelines, parenthesised commands) and for the Helm and Sprig functions in
FUNCS, each written to behave as Helm's and Sprig's documentation says (values read from YAML
are numbers as Helm holds them, float64: `{{ 1000000 }}` from values.yaml prints `1e+06`, `eq`
refuses to compare a number with a string). Two checks Helm only makes with --strict: every
`.Values` path a template names must be defined in values.yaml (textually, and again when
rendering: reading a missing key of the values is an error), and every rendered manifest must
parse as YAML. As Helm does, it validates the values against values.schema.json (JSON Schema,
with python3-jsonschema), checks Chart.yaml's kubeVersion against the cluster version given,
and renders templates/NOTES.txt as text. Anything outside what it knows is an error naming
the template, never a guess.

    render_chart.py CHART_DIR OUT_DIR [-f VALUES.yaml ...] [--release NAME]
                    [--namespace NS] [--kube-version v1.29.0] [--variant NAME=FILE ...]

writes OUT_DIR/<template>.yaml per template (multi-document), OUT_DIR/NOTES.txt,
OUT_DIR/manifest.json (every document as JSON), OUT_DIR/config/<key> for each ConfigMap data
entry, OUT_DIR/values.json (the values the templates saw), OUT_DIR/errors.txt and
OUT_DIR/value_paths.json (the chart's value paths). Each --variant renders again with FILE
over the -f files, into OUT_DIR/variants/NAME/, without reading the chart again. Exit code 0
when everything rendered and parsed, 1 otherwise with the reasons on stderr.
"""

import argparse
import base64
import copy
import datetime
import decimal
import functools
import hashlib
import json
import math
import os
import re
import sys

import yaml


class TemplateError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Lexing: text and {{ actions }} with trim markers and comments, as Go's text/template lexes
# them: "{{- " trims the white space before the action, " -}}" the white space after it, and
# a "}}" inside a quoted or raw string does not end the action.

TRIM_LEFT = ("- ", "-\t", "-\n", "-\r")


def lex(source, name):
    """Returns [('text', str) | ('action', str)], trims applied, comments dropped."""
    tokens = []
    pos = 0
    trim_next = False
    while True:
        start = source.find("{{", pos)
        text = source[pos:] if start < 0 else source[pos:start]
        if start >= 0 and source[start + 2:start + 4] in TRIM_LEFT:
            text = text.rstrip(" \t\r\n")
        if trim_next:
            text = text.lstrip(" \t\r\n")
        if text:
            tokens.append(("text", text))
        if start < 0:
            return tokens
        i = start + 2
        if source[i:i + 2] in TRIM_LEFT:
            i += 2
        body_start = i
        quote = None
        while True:
            if i >= len(source):
                line = source[:start].count("\n") + 1
                raise TemplateError(f"{name}:{line}: unclosed action")
            c = source[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 2
                    continue
                if c == quote:
                    quote = None
                i += 1
                continue
            if source.startswith("/*", i) and source[body_start:i].strip() == "":
                end = source.find("*/", i + 2)
                if end < 0:
                    raise TemplateError(f"{name}: unclosed comment")
                i = end + 2
                continue
            if c in "\"`":
                quote = c
                i += 1
                continue
            if source[i] in " \t\r\n" and source.startswith("-}}", i + 1):
                body = source[body_start:i]
                pos = i + 4
                trim_next = True
                break
            if source.startswith("}}", i):
                body = source[body_start:i]
                pos = i + 2
                trim_next = False
                break
            i += 1
        body = body.strip()
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError(f"{name}: a comment must be the whole action: {{{{{body}}}}}")
            continue
        tokens.append(("action", body))


# ---------------------------------------------------------------------------------------------
# Parsing actions into a tree.

TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)'
    r"|(?P<num>-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?))"
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
        if kind == "field" and m.start(kind) == pos and out and out[-1] == ("op", ")"):
            kind = "chain"  # ").field" with nothing between: a field of the value before
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def parse_number(text):
    if text.lower().lstrip("-").startswith("0x"):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)


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
            return ("lit", parse_number(value))
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
            nk, nv = self.peek()
            if nk == "chain":
                raise TemplateError(f"{self.where}: a field of a parenthesised value ('){nv}') is "
                                    "outside the supported subset")
            return ("sub", p)
        raise TemplateError(f"{self.where}: unexpected '{value}'")


def parse_expr(expr, where):
    """Parses 'PIPELINE', '$x := PIPELINE', '$x = PIPELINE' or '$i, $v := PIPELINE'."""
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
    ('range', decl, pipe, body, else) ('with', [(pipe, body)...], else_body)
    ('define', name, body) ('template', name, pipe) ('break',) ('continue',)."""
    pos = 0
    loops = 0

    def block(stop):
        nonlocal pos, loops
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
            if word in ("if", "with"):
                branches = [(parse_expr(rest, where)[1], None)]
                inner, ended, tail = block(("end", "else"))
                branches[-1] = (branches[-1][0], inner)
                else_body = []
                while ended == "else":
                    # "else if" chains only onto if, "else with" only onto with (Go 1.23).
                    if tail.startswith(word + " "):
                        branches.append((parse_expr(tail[len(word) + 1:], where)[1], None))
                        inner, ended, tail = block(("end", "else"))
                        branches[-1] = (branches[-1][0], inner)
                    elif tail:
                        raise TemplateError(f"{where}: 'else {tail}' after {word}")
                    else:
                        else_body, ended, tail = block(("end",))
                body.append((word, branches, else_body))
            elif word == "range":
                decl, pipe = parse_expr(rest, where)
                loops += 1
                inner, ended, _ = block(("end", "else"))
                loops -= 1
                else_body = []
                if ended == "else":
                    else_body, _, _ = block(("end",))
                body.append(("range", decl, pipe, inner, else_body))
            elif word in ("break", "continue"):
                if not loops:
                    raise TemplateError(f"{where}: {word} outside range")
                body.append((word,))
            elif word in ("define", "block"):
                m = re.match(r'("(?:[^"\\]|\\.)*"|`[^`]*`)\s*(.*)', rest, re.S)
                if not m:
                    raise TemplateError(f"{where}: {word} needs a quoted name")
                tname = json.loads(m.group(1)) if m.group(1)[0] == '"' else m.group(1)[1:-1]
                outer_loops, loops = loops, 0
                inner, _, _ = block(("end",))
                loops = outer_loops
                body.append(("define", tname, inner))
                if word == "block":
                    if not m.group(2):
                        raise TemplateError(f"{where}: block needs a pipeline")
                    body.append(("template", tname, parse_expr(m.group(2), where)[1]))
            elif word == "template":
                m = re.match(r'("(?:[^"\\]|\\.)*"|`[^`]*`)\s*(.*)', rest, re.S)
                if not m:
                    raise TemplateError(f"{where}: template needs a quoted name")
                tname = json.loads(m.group(1)) if m.group(1)[0] == '"' else m.group(1)[1:-1]
                pipe = parse_expr(m.group(2), where)[1] if m.group(2) else None
                body.append(("template", tname, pipe))
            else:
                decl, pipe = parse_expr(value, where)
                body.append(("out", decl, pipe))
        if stop:
            raise TemplateError(f"{name}: missing {{{{ end }}}}")
        return body, None, ""

    body, _, _ = block(())
    return body


# ---------------------------------------------------------------------------------------------
# Values as Helm holds them, and Go's ways of printing them.

class Missing:
    """A key that does not exist (Go prints it as <no value>, which Helm erases)."""


NIL = (None, Missing)


def helm_values(v):
    """Values as Helm reads YAML (through JSON): every number is a float64, timestamps text."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return float(v)
    if isinstance(v, float):
        return v
    if isinstance(v, dict):
        return {str(k): helm_values(x) for k, x in v.items()}
    if isinstance(v, list):
        return [helm_values(x) for x in v]
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    raise TemplateError(f"a value of type {type(v).__name__} cannot be held by Helm")


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


def go_float(f):
    """fmt's %v of a float64 (strconv 'g', shortest): the shortest digits that read back,
    with an exponent when it is below -4 or from 6 on, which is why Helm prints a
    values.yaml 1000000 as 1e+06."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exp += 1
    nd = len(digits)
    dp = nd + exp  # position of the decimal point
    x = dp - 1
    s = "".join(str(d) for d in digits)
    if x < -4 or x >= 6:
        mant = s[0] + ("." + s[1:] if nd > 1 else "")
        out = f"{mant}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    elif dp <= 0:
        out = "0." + "0" * (-dp) + s
    elif dp >= nd:
        out = s + "0" * (dp - nd)
    else:
        out = s[:dp] + "." + s[dp:]
    return ("-" if sign else "") + out


def go_str(v):
    """How an action prints a value (Helm erases "<no value>", so nil prints as nothing)."""
    if v is None or v is Missing:
        return ""
    return go_sprint(v)


def go_sprint(v):
    """fmt.Sprint of a value, as print, printf %v and toString produce it."""
    if v is None or v is Missing:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(x)}" for k, x in sorted(v.items())) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_sprint(x) for x in v) + "]"
    return str(v)


def go_quote(s):
    """strconv.Quote: Go escapes, printable Unicode kept as is."""
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c in "\a\b\f\n\r\t\v":
            out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                        "\t": "\\t", "\v": "\\v"}[c])
        elif o < 0x20 or o == 0x7f:
            out.append(f"\\x{o:02x}")
        elif not c.isprintable() and c != " ":
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def json_ready(v):
    """What encoding/json writes for a value: float64s that are whole numbers below 1e21
    print without a fraction."""
    if v is Missing:
        return None
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
        return int(v)
    if isinstance(v, dict):
        return {k: json_ready(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_ready(x) for x in v]
    return v


def to_json(v):
    # encoding/json: keys sorted, compact, HTML characters escaped, other Unicode as is.
    text = json.dumps(json_ready(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") \
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


SafeDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def to_yaml(v):
    # Helm's toYaml: sigs.k8s.io/yaml (keys sorted), trailing newline removed; nil is "null".
    if v is None or v is Missing:
        return "null"
    return yaml.dump(json_ready(v), Dumper=SafeDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True).rstrip("\n")


def from_yaml(s):
    # Helm's fromYaml: a map (numbers as float64); a parse error is kept under "Error".
    try:
        v = yaml.load(go_str(s), Loader=StrictLoader)
    except yaml.YAMLError as e:
        return {"Error": str(e)}
    if v is None:
        return {}
    if not isinstance(v, dict):
        return {"Error": f"error unmarshaling JSON: cannot unmarshal {type(v).__name__} into "
                         "map[string]interface {}"}
    return helm_values(v)


def from_json(s):
    try:
        v = json.loads(go_str(s))
    except ValueError as e:
        return {"Error": str(e)}
    if not isinstance(v, dict):
        return {"Error": "json: cannot unmarshal into map[string]interface {}"}
    return helm_values(v)


PRINTF_VERB = re.compile(r"%([-+# 0]*)(\d+)?(?:\.(\d+))?(.)", re.S)


def go_printf(fmt, *args):
    """fmt.Sprintf for the verbs templates use: %v %s %d %q %f %t %x %%, with the flags - + 0
    and space, a width and a precision. A wrong type prints %!verb(type=value) as Go does."""
    out = []
    it = iter(args)
    pos = 0
    for m in PRINTF_VERB.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, verb = m.group(1), m.group(2), m.group(3), m.group(4)
        if verb == "%":
            out.append("%")
            continue
        a = next(it, Missing)
        if a is Missing:
            out.append(f"%!{verb}(MISSING)")
            continue
        bad = f"%!{verb}({type_of(a)}={go_sprint(a)})" if a is not None else f"%!{verb}(<nil>)"
        is_int = isinstance(a, int) and not isinstance(a, bool)
        if verb == "v":
            text = go_sprint(a)
        elif verb == "s":
            # Text as is, lists and maps element by element; anything else is a bad verb.
            text = go_sprint(a) if isinstance(a, (str, list, dict)) else bad
            if prec is not None and isinstance(a, str):
                text = text[:int(prec)]
        elif verb == "q":
            text = go_quote(a) if isinstance(a, str) else bad
        elif verb == "t":
            text = go_sprint(a) if isinstance(a, bool) else bad
        elif verb in "dx":
            if is_int:
                text = str(abs(a)) if verb == "d" else format(abs(a), "x")
                text = ("-" if a < 0 else "+" if "+" in flags else " " if " " in flags
                        else "") + text
            elif verb == "x" and isinstance(a, str):
                text = a.encode().hex()
            else:
                text = bad
        elif verb == "f":
            if isinstance(a, (int, float)) and not isinstance(a, bool):
                text = f"{float(a):{'+' if '+' in flags else ''}.{int(prec) if prec else 6}f}"
            else:
                text = bad
        else:
            raise TemplateError(f"printf: verb %{verb} is outside the supported subset")
        if width and len(text) < int(width):
            pad = int(width) - len(text)
            if "-" in flags:
                text += " " * pad
            elif "0" in flags and verb in "dfx" and text != bad:
                sign = text[0] if text[0] in "+- " else ""
                text = sign + "0" * pad + text[len(sign):]
            else:
                text = " " * pad + text
        out.append(text)
    out.append(fmt[pos:])
    extra = list(it)
    if extra:
        out.append("%!(EXTRA " + ", ".join(f"{type_of(x)}={go_sprint(x)}" for x in extra) + ")")
    return "".join(out)


def type_of(v):
    """Go's type name of a value Helm holds (typeOf)."""
    if v is None or v is Missing:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, list):
        return "[]interface {}"
    return type(v).__name__


def kind_of(v):
    """reflect.Kind of a value (kindOf, kindIs)."""
    if v is None or v is Missing:
        return "invalid"
    return {"bool": "bool", "int": "int", "float64": "float64", "string": "string",
            "map[string]interface {}": "map", "[]interface {}": "slice"}[type_of(v)]


def to_int64(v):
    """cast.ToInt64 as Sprig's math uses it: floats truncate, text parses as Go's base-0
    integers (0x.., 0.. octal), anything unreadable or nil is 0."""
    if v is None or v is Missing:
        return 0
    if isinstance(v, bool):
        return 1 if v else 0
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v)
    if isinstance(v, str):
        text = re.sub(r"\.0*$", "", v.strip())
        try:
            if re.fullmatch(r"[-+]?0[0-7]+", text):
                return int(text, 8)
            return int(text, 0)
        except ValueError:
            return 0
    return 0


# Go's comparison functions (text/template eq, ne, lt, le, gt, ge).

def basic_kind(v):
    if v is None or v is Missing:
        return None
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    return "other"


def go_eq(a, *bs):
    if not bs:
        raise TemplateError("eq: missing argument for comparison")
    ka = basic_kind(a)
    for b in bs:
        kb = basic_kind(b)
        if ka != kb:
            if ka is not None and kb is not None:
                raise TemplateError(f"eq: incompatible types for comparison "
                                    f"({type_of(a)} {go_sprint(a)} and {type_of(b)} {go_sprint(b)})")
            truth = False
        elif ka == "other":
            raise TemplateError(f"eq: non-comparable type {type_of(a)}")
        elif ka is None:
            truth = True
        else:
            truth = a == b
        if truth:
            return True
    return False


def go_less(a, b, name):
    ka, kb = basic_kind(a), basic_kind(b)
    if ka in (None, "bool", "other") or kb in (None, "bool", "other"):
        raise TemplateError(f"{name}: invalid type for comparison")
    if ka != kb:
        raise TemplateError(f"{name}: incompatible types for comparison")
    return a < b


# Sprig's "empty", deep copies and merges.

def deep_copy(v):
    if v is Missing:
        return None
    return copy.deepcopy(v)


def merge_into(dst, src, overwrite):
    """Sprig's merge (the destination's values win; a nil there is no value) and
    mergeOverwrite (the sources' values win, false and empty ones too): maps merge key by key,
    anything else is taken whole, as the same instance (a merge is deep, not a deep copy)."""
    for k, v in src.items():
        if k in dst and isinstance(dst[k], dict) and isinstance(v, dict):
            merge_into(dst[k], v, overwrite)
        elif overwrite or k not in dst or dst[k] is None or dst[k] is Missing:
            dst[k] = v
    return dst


def sprig_merge(dst, *srcs):
    for s in srcs:
        if s is not None and s is not Missing:
            merge_into(need_dict(dst, "merge"), need_dict(s, "merge"), overwrite=False)
    return dst


def sprig_merge_overwrite(dst, *srcs):
    for s in srcs:
        if s is not None and s is not Missing:
            merge_into(need_dict(dst, "mergeOverwrite"), need_dict(s, "mergeOverwrite"),
                       overwrite=True)
    return dst


def str_list(v):
    """Sprig's strslice: the items of a list as text, nils left out."""
    if isinstance(v, list):
        return [go_sprint(x) for x in v if x is not None and x is not Missing]
    if v is None or v is Missing:
        return []
    return [go_sprint(v)]


def need_list(v, name):
    if not isinstance(v, list):
        raise TemplateError(f"{name}: cannot find {name} on type {type_of(v)}")
    return v


def need_dict(v, name):
    if not isinstance(v, dict):
        raise TemplateError(f"{name}: wrong type for value; expected map[string]interface {{}}; "
                            f"got {type_of(v)}")
    return v


def sprig_dict(*a):
    d = {}
    for i in range(0, len(a), 2):
        d[go_sprint(a[i])] = a[i + 1] if i + 1 < len(a) else ""
    return d


def sprig_set(d, k, v):
    need_dict(d, "set")[k] = v
    return d


def sprig_unset(d, k):
    need_dict(d, "unset").pop(k, None)
    return d


def sprig_uniq(v):
    out = []
    for x in need_list(v, "uniq"):
        if x not in out:
            out.append(x)
    return out


def sprig_trunc(n, s):
    s = go_sprint(s) if not isinstance(s, str) else s
    n = to_int64(n)
    if n < 0 and len(s) + n > 0:
        return s[len(s) + n:]
    if n >= 0 and len(s) > n:
        return s[:n]
    return s


def sprig_quote(*a):
    return " ".join(go_quote(go_sprint(x)) for x in a if x is not None and x is not Missing)


def sprig_squote(*a):
    return " ".join("'" + go_sprint(x) + "'" for x in a if x is not None and x is not Missing)


# Masterminds/semver v3 as Sprig's semverCompare uses it.

SEMVER = re.compile(
    r"^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?"
    r"(?:-([0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*))?(?:\+([0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*))?$")


class Version:
    def __init__(self, text):
        m = SEMVER.match(text.strip())
        if not m:
            raise TemplateError(f"semver: invalid semantic version '{text}'")
        self.major, self.minor, self.patch = (int(m.group(i) or 0) for i in (1, 2, 3))
        self.pre = m.group(4) or ""

    def key(self):
        return (self.major, self.minor, self.patch)

    def compare(self, other):
        if self.key() != other.key():
            return -1 if self.key() < other.key() else 1
        return compare_prerelease(self.pre, other.pre)


def compare_prerelease(a, b):
    """SemVer 2 precedence of prereleases: none ranks above any; numeric identifiers compare
    as numbers and below alphanumeric ones; a shorter list of equal identifiers ranks lower."""
    if a == b:
        return 0
    if not a:
        return 1
    if not b:
        return -1
    pa, pb = a.split("."), b.split(".")
    for x, y in zip(pa, pb):
        if x == y:
            continue
        xn, yn = x.isdigit(), y.isdigit()
        if xn and yn:
            return -1 if int(x) < int(y) else 1
        if xn != yn:
            return -1 if xn else 1
        return -1 if x < y else 1
    return -1 if len(pa) < len(pb) else (1 if len(pa) > len(pb) else 0)


CV = r"v?(?:[0-9xX*]+)(?:\.[0-9xX*]+)?(?:\.[0-9xX*]+)?(?:-[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?" \
     r"(?:\+[0-9A-Za-z\-]+(?:\.[0-9A-Za-z\-]+)*)?"
OPS = r"=>|=<|>=|<=|!=|~>|=|>|<|~|\^|"
FIND_CONSTRAINT = re.compile(rf"({OPS})\s*({CV})")
HYPHEN_RANGE = re.compile(rf"\s*({CV})\s+-\s+({CV})\s*")
VALID_AND = re.compile(rf"^(\s*({OPS})\s*({CV})\s*)((?:\s+|,\s*)({OPS})\s*({CV})\s*)*$")
IS_X = ("x", "X", "*")


class Constraint:
    def __init__(self, op, text):
        self.op = {"=>": ">=", "=<": "<=", "~>": "~"}.get(op, op)
        self.orig = text
        m = re.match(r"^v?([0-9xX*]+)(?:\.([0-9xX*]+))?(?:\.([0-9xX*]+))?(-[^+]*)?", text)
        major, minor, patch, pre = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        self.dirty = self.minor_dirty = self.patch_dirty = False
        if major in IS_X:
            self.con = Version("0.0.0" + pre)
            self.dirty = True
        elif minor is None or minor in IS_X:
            self.con = Version(f"{major}.0.0{pre}")
            self.dirty = self.minor_dirty = True
        elif patch is None or patch in IS_X:
            self.con = Version(f"{major}.{minor}.0{pre}")
            self.dirty = self.patch_dirty = True
        else:
            self.con = Version(text)

    def check(self, v):
        c = self.con
        if v.pre and not c.pre:
            return False  # prereleases only match a constraint that names one
        op = self.op
        if op in ("", "="):
            return self.tilde(v) if self.dirty else v.compare(c) == 0
        if op == "!=":
            if self.dirty:
                if c.major != v.major:
                    return True
                if self.minor_dirty:
                    return False
                if c.minor != v.minor:
                    return True
                if self.patch_dirty:
                    return (v.pre or c.pre) and compare_prerelease(v.pre, c.pre) != 0
            return v.compare(c) != 0
        if op == ">":
            if not self.dirty:
                return v.compare(c) > 0
            if v.major != c.major:
                return v.major > c.major
            if self.minor_dirty:
                return False
            if self.patch_dirty:
                return v.minor > c.minor
            return v.compare(c) > 0
        if op == "<":
            return v.compare(c) < 0
        if op == ">=":
            return v.compare(c) >= 0
        if op == "<=":
            if not self.dirty:
                return v.compare(c) <= 0
            if v.major > c.major:
                return False
            if v.major == c.major and v.minor > c.minor and not self.minor_dirty:
                return False
            return True
        if op == "~":
            return self.tilde(v)
        if op == "^":
            if v.compare(c) < 0:
                return False
            if c.major > 0 or self.minor_dirty:
                return v.major == c.major
            if v.major > 0:
                return False
            if c.minor > 0 or self.patch_dirty:
                return v.minor == c.minor
            if v.minor > 0:
                return False
            return v.patch == c.patch
        raise TemplateError(f"semver: operator '{op}'")

    def tilde(self, v):
        c = self.con
        if v.compare(c) < 0:
            return False
        if c.key() == (0, 0, 0) and not self.minor_dirty and not self.patch_dirty:
            return True
        if v.major != c.major:
            return False
        if v.minor != c.minor and not self.minor_dirty:
            return False
        return True


def semver_compare(constraint, version):
    """True when `version` satisfies `constraint` (ranges joined by || of comma- or
    space-separated comparisons; hyphen ranges; x wildcards; ~ and ^)."""
    text = go_sprint(constraint)
    for m in list(HYPHEN_RANGE.finditer(text)):
        text = text.replace(m.group(0), f">= {m.group(1)}, <= {m.group(2)}", 1)
    v = Version(go_sprint(version))
    for alternative in text.split("||"):
        if alternative.strip() == "":
            parts = [Constraint("", "*")]
        else:
            if not VALID_AND.match(alternative):
                raise TemplateError(f"semver: improper constraint: {alternative}")
            parts = [Constraint(op, ver) for op, ver in FIND_CONSTRAINT.findall(alternative)]
        if all(p.check(v) for p in parts):
            return True
    return False


def regex_match(pattern, s):
    try:
        return re.search(go_sprint(pattern), go_sprint(s)) is not None
    except re.error as e:
        raise TemplateError(f"regexMatch: {e}")


def b64dec(s):
    try:
        return base64.b64decode(go_sprint(s), validate=True).decode()
    except (ValueError, UnicodeDecodeError) as e:
        return str(e)


def sprig_indent(n, s):
    pad = " " * to_int64(n)
    return pad + go_sprint(s).replace("\n", "\n" + pad) if s not in NIL else pad


def sprig_first(v):
    if v is None or v is Missing:
        return None
    return need_list(v, "first")[0] if v else None


def sprig_last(v):
    if v is None or v is Missing:
        return None
    return need_list(v, "last")[-1] if v else None


def go_len(v):
    if v is None or v is Missing:
        raise TemplateError("len of nil pointer")
    if isinstance(v, (str, list, dict)):
        return len(v)
    raise TemplateError(f"len of type {type_of(v)}")


def sprig_div(a, b):
    if to_int64(b) == 0:
        raise TemplateError("div: integer divide by zero")
    q = abs(to_int64(a)) // abs(to_int64(b))
    return q if (to_int64(a) >= 0) == (to_int64(b) >= 0) else -q


def sprig_mod(a, b):
    if to_int64(b) == 0:
        raise TemplateError("mod: integer divide by zero")
    return to_int64(a) - sprig_div(a, b) * to_int64(b)


FUNCS = {
    # strings
    "quote": sprig_quote,
    "squote": sprig_squote,
    "upper": lambda s: go_sprint(s).upper(),
    "lower": lambda s: go_sprint(s).lower(),
    "trim": lambda s: go_sprint(s).strip(),
    "trimSuffix": lambda suf, s: go_sprint(s)[: -len(suf)] if suf and go_sprint(s).endswith(suf)
    else go_sprint(s),
    "trimPrefix": lambda pre, s: go_sprint(s)[len(pre):] if go_sprint(s).startswith(pre)
    else go_sprint(s),
    "trunc": sprig_trunc,
    "replace": lambda old, new, s: go_sprint(s).replace(go_sprint(old), go_sprint(new)),
    "contains": lambda sub, s: go_sprint(sub) in go_sprint(s),
    "hasPrefix": lambda pre, s: go_sprint(s).startswith(go_sprint(pre)),
    "hasSuffix": lambda suf, s: go_sprint(s).endswith(go_sprint(suf)),
    "indent": sprig_indent,
    "nindent": lambda n, s: "\n" + sprig_indent(n, s),
    "printf": go_printf,
    "print": lambda *a: "".join(
        (" " if i and not isinstance(a[i - 1], str) and not isinstance(x, str) else "")
        + go_sprint(x) for i, x in enumerate(a)),
    "toString": go_sprint,
    "splitList": lambda sep, s: go_sprint(s).split(go_sprint(sep)),
    "join": lambda sep, l: go_sprint(sep).join(str_list(l)),
    "regexMatch": regex_match,
    "b64enc": lambda s: base64.b64encode(go_sprint(s).encode()).decode(),
    "b64dec": b64dec,
    "sha256sum": lambda s: hashlib.sha256(go_sprint(s).encode()).hexdigest(),
    # conversions and types
    "int": to_int64,
    "int64": to_int64,
    "toYaml": to_yaml,
    "fromYaml": from_yaml,
    "toJson": to_json,
    "fromJson": from_json,
    "kindOf": kind_of,
    "kindIs": lambda k, v: kind_of(v) == k,
    "typeOf": type_of,
    # logic
    "not": lambda v: not truthy(v),
    "eq": go_eq,
    "ne": lambda a, b: not go_eq(a, b),
    "lt": lambda a, b: go_less(a, b, "lt"),
    "le": lambda a, b: go_less(a, b, "le") or go_eq(a, b),
    "gt": lambda a, b: go_less(b, a, "gt"),
    "ge": lambda a, b: go_less(b, a, "ge") or go_eq(a, b),
    "empty": lambda v: not truthy(v),
    "default": lambda d, *v: v[0] if v and truthy(v[0]) else d,
    "coalesce": lambda *a: next((x for x in a if truthy(x)), None),
    "ternary": lambda t, f, cond: t if cond is True else f,
    "semverCompare": semver_compare,
    # lists
    "list": lambda *a: list(a),
    "first": sprig_first,
    "last": sprig_last,
    "append": lambda l, v: list(need_list(l, "append")) + [v],
    "has": lambda v, l: v in need_list(l, "has") if l not in NIL else False,
    "compact": lambda l: [x for x in need_list(l, "compact") if truthy(x)],
    "uniq": sprig_uniq,
    "sortAlpha": lambda l: sorted(str_list(l)),
    "len": go_len,
    # dicts
    "dict": sprig_dict,
    "get": lambda d, k: (d or {}).get(k, ""),
    "set": sprig_set,
    "unset": sprig_unset,
    "hasKey": lambda d, k: k in (d or {}),
    "keys": lambda *ds: [k for d in ds for k in (d or {})],
    "pick": lambda d, *ks: {k: v for k, v in (d or {}).items() if k in ks},
    "omit": lambda d, *ks: {k: v for k, v in (d or {}).items() if k not in ks},
    "merge": sprig_merge,
    "mergeOverwrite": sprig_merge_overwrite,
    "deepCopy": deep_copy,
    # math (Sprig converts to int64)
    "add": lambda *a: sum(to_int64(x) for x in a),
    "add1": lambda a: to_int64(a) + 1,
    "sub": lambda a, b: to_int64(a) - to_int64(b),
    "mul": lambda *a: functools.reduce(lambda x, y: x * y, (to_int64(x) for x in a), 1),
    "div": sprig_div,
    "mod": sprig_mod,
    "max": lambda a, *r: max([to_int64(a)] + [to_int64(x) for x in r]),
    "min": lambda a, *r: min([to_int64(a)] + [to_int64(x) for x in r]),
}
# Helm's include, tpl, required and fail, and Go's index, are in Renderer.call: they need the
# templates or the values' strictness.

# The Go types of the functions' parameters, as Sprig and Helm declare them (s string, i int,
# b bool, m map, . anything; "*" repeats the last for the rest). Go templates do not convert:
# a float64 from values.yaml handed to an int parameter, or a number to a string one, is an
# error in Helm, and so it is here.
PARAM_TYPES = {
    "upper": "s", "lower": "s", "trim": "s", "trimSuffix": "ss", "trimPrefix": "ss",
    "trunc": "is", "replace": "sss", "contains": "ss", "hasPrefix": "ss", "hasSuffix": "ss",
    "indent": "is", "nindent": "is", "printf": "s.*", "splitList": "ss", "join": "s.",
    "regexMatch": "ss", "b64enc": "s", "b64dec": "s", "sha256sum": "s", "fromYaml": "s",
    "fromJson": "s", "kindIs": "s.", "semverCompare": "ss", "ternary": "..b",
    "get": "ms", "set": "ms.", "unset": "ms", "hasKey": "ms", "pick": "ms*", "omit": "ms*",
    "keys": "m*", "merge": "m*", "mergeOverwrite": "m*",
    "include": "s.", "tpl": "s.", "required": "s.", "fail": "s",
}
GO_TYPE_NAMES = {"s": "string", "i": "int", "b": "bool", "m": "map[string]interface {}"}


def check_param_types(name, args):
    kinds = PARAM_TYPES.get(name, "")
    rest = kinds[-2] if kinds.endswith("*") else "."
    fixed = kinds[:-1] if kinds.endswith("*") else kinds
    for i, a in enumerate(args):
        kind = fixed[i] if i < len(fixed) else rest
        if kind == ".":
            continue
        nil = a is None or a is Missing
        if kind == "m" and nil:
            continue  # a nil map is a map
        ok = {"s": isinstance(a, str), "i": isinstance(a, int) and not isinstance(a, bool),
              "b": isinstance(a, bool), "m": isinstance(a, dict)}[kind]
        if not ok:
            expected = GO_TYPE_NAMES[kind]
            if nil:
                raise TemplateError(f"{name}: invalid value; expected {expected}")
            raise TemplateError(f"{name}: wrong type for value; expected {expected}; got "
                                f"{type_of(a)}")


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


class Break(Exception):
    pass


class Continue(Exception):
    pass


class Renderer:
    def __init__(self, templates, strict_roots):
        self.templates = templates  # name -> tree
        # id of a values map -> the keys values.yaml gives it; reading another is an error
        self.strict_roots = strict_roots
        self.depth = 0
        self.tpl_count = 0

    def field(self, value, path, where):
        for i, part in enumerate(path):
            if isinstance(value, dict):
                if part not in value:
                    if id(value) in self.strict_roots and part not in self.strict_roots[id(value)]:
                        raise TemplateError(f"{where}: .{'.'.join(path)}: key '{part}' is not "
                                            "defined in values.yaml")
                    value = Missing
                    continue
                value = value[part]
            elif value is Missing or value is None:
                raise TemplateError(f"{where}: nil pointer evaluating interface {{}}.{part}")
            else:
                raise TemplateError(f"{where}: can't evaluate field {part} in type "
                                    f"{type_of(value)}")
        return value

    def call(self, name, args, where):
        try:
            check_param_types(name, args)
        except TemplateError as e:
            raise TemplateError(f"{where}: {e}")
        if name == "include":
            if len(args) != 2:
                raise TemplateError(f"{where}: include takes a name and a value")
            return self.execute(go_sprint(args[0]), args[1], where)
        if name == "tpl":
            if len(args) != 2:
                raise TemplateError(f"{where}: tpl takes a template text and a value")
            return self.tpl(go_sprint(args[0]), args[1], where)
        if name == "required":
            if len(args) != 2:
                raise TemplateError(f"{where}: required takes a message and a value")
            # Helm: nil, or an empty string, is missing; false, 0 and empty lists are values.
            if args[1] is None or args[1] is Missing or args[1] == "":
                raise TemplateError(f"{where}: {go_sprint(args[0])}")
            return args[1]
        if name == "fail":
            raise TemplateError(f"{where}: {go_sprint(args[0]) if args else ''}")
        if name == "index":
            v = args[0]
            for k in args[1:]:
                if isinstance(v, dict):
                    if k not in v and id(v) in self.strict_roots \
                            and k not in self.strict_roots[id(v)]:
                        raise TemplateError(f"{where}: index: key '{k}' is not defined in "
                                            "values.yaml")
                    v = v.get(k, Missing)
                elif isinstance(v, (list, str)) and not isinstance(k, bool) \
                        and isinstance(k, int):
                    if not 0 <= int(k) < len(v):
                        raise TemplateError(f"{where}: index out of range: {go_sprint(k)}")
                    v = v[int(k)] if isinstance(v, list) else ord(v[int(k)])
                elif v is None or v is Missing:
                    raise TemplateError(f"{where}: index of untyped nil")
                elif isinstance(v, (list, str)):
                    raise TemplateError(f"{where}: cannot index slice/array with type {type_of(k)}")
                else:
                    raise TemplateError(f"{where}: can't index item of type {type_of(v)}")
            return v
        if name not in FUNCS:
            raise TemplateError(f"{where}: function '{name}' is outside the supported subset")
        try:
            return FUNCS[name](*args)
        except TemplateError as e:
            raise TemplateError(f"{where}: {e}")
        except Exception as e:  # a wrong argument count or type
            raise TemplateError(f"{where}: {name}: {e}")

    def tpl(self, text, dot, where):
        self.tpl_count += 1
        name = f"{where.split(':')[0]}#tpl{self.tpl_count}"
        tree = build_tree(lex(text, name), name)
        defines = {}
        collect_defines(tree, defines)
        saved = {k: self.templates.get(k) for k in defines}
        self.templates.update(defines)
        self.templates[name] = tree
        try:
            return self.execute(name, dot, where)
        finally:
            del self.templates[name]
            for k, v in saved.items():
                if v is None:
                    del self.templates[k]
                else:
                    self.templates[k] = v

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
            return self.call(node[1], [], where)
        raise TemplateError(f"{where}: bad operand")

    def pipe(self, pipe, dot, scope, where):
        value = Missing
        first = True
        for cmd in pipe[1]:
            head = cmd[0]
            if head[0] == "fn" and head[1] in ("and", "or"):
                # Go evaluates the arguments of and/or only as far as it needs to.
                operands = [lambda a=a: self.arg(a, dot, scope, where) for a in cmd[1:]]
                if not first:
                    operands.append(lambda v=value: v)
                if not operands:
                    raise TemplateError(f"{where}: {head[1]} needs arguments")
                for get in operands:
                    value = get()
                    if truthy(value) != (head[1] == "and"):
                        break
            elif head[0] == "fn":
                args = [self.arg(a, dot, scope, where) for a in cmd[1:]]
                if not first:
                    args.append(value)
                value = self.call(head[1], args, where)
            else:
                if len(cmd) != 1 or not first:
                    raise TemplateError(f"{where}: a value cannot take arguments (method calls "
                                        "are outside the supported subset)")
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
            elif kind in ("if", "with"):
                for cond, body in node[1]:
                    value = self.pipe(cond, dot, scope, where)
                    if truthy(value):
                        self.run(body, value if kind == "with" else dot, Scope(scope), out, where)
                        break
                else:
                    self.run(node[2], dot, Scope(scope), out, where)
            elif kind == "range":
                decl, pipe, body, else_body = node[1], node[2], node[3], node[4]
                value = self.pipe(pipe, dot, scope, where)
                if isinstance(value, dict):
                    items = sorted(value.items())
                elif isinstance(value, list):
                    items = list(enumerate(value))
                elif isinstance(value, int) and not isinstance(value, bool):
                    items = [(i, i) for i in range(value)]  # Go 1.22: range over an integer
                elif value is None or value is Missing:
                    items = []
                else:
                    raise TemplateError(f"{where}: range can't iterate over {go_sprint(value)}")
                if not items:
                    self.run(else_body, dot, Scope(scope), out, where)
                for key, item in items:
                    inner = Scope(scope)
                    if len(decl) == 1:
                        inner.declare(decl[0], item)
                    elif len(decl) == 2:
                        inner.declare(decl[0], key)
                        inner.declare(decl[1], item)
                    try:
                        self.run(body, item, inner, out, where)
                    except Continue:
                        continue
                    except Break:
                        break
            elif kind == "break":
                raise Break()
            elif kind == "continue":
                raise Continue()
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
        try:
            self.run(self.templates[name], dot, Scope(**{"$": dot}), out, name)
        finally:
            self.depth -= 1
        return "".join(out)


def collect_defines(nodes, into):
    for node in nodes:
        if node[0] == "define":
            into[node[1]] = node[2]
            collect_defines(node[2], into)
        elif node[0] in ("if", "with"):
            for _, body in node[1]:
                collect_defines(body, into)
            collect_defines(node[2], into)
        elif node[0] == "range":
            collect_defines(node[3], into)
            collect_defines(node[4], into)


# ---------------------------------------------------------------------------------------------
# Values files, the schema, the chart.

def merge(base, override):
    """Helm's coalescing of a values file over the defaults: maps merge, anything else
    (lists included) replaces, and a null deletes the default's key."""
    for k, v in override.items():
        if v is None and k in base:
            del base[k]
        elif isinstance(v, dict) and isinstance(base.get(k), dict):
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


VALIDATORS = {}  # id(schema) -> (schema, validator or None, error)


def validate_schema(schema, values, label):
    """Helm's check of the values against values.schema.json; a list of messages."""
    try:
        import jsonschema
    except ImportError:
        return [f"{label}: the chart has values.schema.json but python3-jsonschema is not "
                "installed (scripts/install-deps.sh)"]
    if id(schema) not in VALIDATORS:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        try:
            cls.check_schema(schema)
            VALIDATORS[id(schema)] = (schema, cls(schema), None)
        except jsonschema.SchemaError as e:
            VALIDATORS[id(schema)] = (schema, None,
                                      f"values.schema.json is not a valid schema: {e.message}")
    _, validator, error = VALIDATORS[id(schema)]
    if error:
        return [error]
    errors = []
    for e in validator.iter_errors(json_ready(values)):
        where = ".".join(str(p) for p in e.path) or "(root)"
        errors.append(f"{label}: values don't meet the specifications of the schema: "
                      f"{where}: {e.message}")
    return sorted(errors)


def resolve(root, node):
    """A schema node with its local $ref ("#/definitions/x") followed."""
    while isinstance(node, dict) and "$ref" in node:
        target = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        node = target
    return node


def free_map(root, node):
    """True when a schema node is a map of free keys (its keys are data, not chart values)."""
    node = resolve(root, node)
    if not isinstance(node, dict):
        return False
    if "properties" not in node:
        return True
    return node.get("additionalProperties", True) is not False


def schema_undescribed(root, node, values, prefix=""):
    """The paths of values.yaml that values.schema.json does not describe, or gives no type."""
    out = []
    node = resolve(root, node)
    props = node.get("properties", {})
    for k, v in values.items():
        path = f"{prefix}{k}"
        sub = props.get(k)
        if sub is None:
            if not free_map(root, node):
                out.append(f"values.yaml: {path} is not described in values.schema.json")
            continue
        sub = resolve(root, sub)
        if not any(key in sub for key in ("type", "oneOf", "anyOf")):
            out.append(f"values.schema.json: {path} has no type")
        if isinstance(v, dict) and "properties" in sub:
            out.extend(schema_undescribed(root, sub, v, path + "."))
    return out


class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A YAML loader that refuses a key given twice in one mapping: Kubernetes' decoder
    refuses it too, and which of the two a tool keeps differs."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def text_keys(v):
    """Map keys as Helm has them after reading YAML through JSON: text (YAML 1.1 reads a
    `yes:` key as the boolean true, which JSON writes as "true")."""
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else go_sprint(k)): text_keys(x) for k, x in v.items()}
    if isinstance(v, list):
        return [text_keys(x) for x in v]
    return v


def load_yaml_file(path, errors):
    try:
        with open(path) as f:
            return text_keys(yaml.load(f, Loader=StrictLoader) or {})
    except (OSError, yaml.YAMLError) as e:
        errors.append(f"{path}: {e}")
        return {}


def value_paths(root, node, values, prefix=""):
    """The chart's value paths: keys of values.yaml, into the maps the schema describes key
    by key (a map of free keys, such as podAnnotations, is one value)."""
    out = []
    node = resolve(root, node) if root else {}
    for k, v in values.items():
        sub = resolve(root, node.get("properties", {}).get(k, {})) if root else {}
        if isinstance(v, dict) and v and (not root or "properties" in sub):
            out.extend(value_paths(root, sub, v, f"{prefix}{k}."))
        else:
            out.append(f"{prefix}{k}")
    return out


class Chart:
    """A chart read once (Chart.yaml, values.yaml, the schema, the templates), rendered with
    any number of value sets."""

    def __init__(self, path, kube_version):
        self.errors = []  # problems of the chart itself, whatever the values
        self.kube_version = kube_version
        with open(os.path.join(path, "Chart.yaml")) as f:
            self.meta = yaml.safe_load(f)
        self.defaults = load_yaml_file(os.path.join(path, "values.yaml"), self.errors)
        self.kube = Version(kube_version)
        if self.meta.get("kubeVersion"):
            try:
                if not semver_compare(self.meta["kubeVersion"], kube_version):
                    self.errors.append(f"chart requires kubeVersion: {self.meta['kubeVersion']} "
                                       f"which is incompatible with Kubernetes {kube_version}")
            except TemplateError as e:
                self.errors.append(f"Chart.yaml kubeVersion: {e}")

        self.schema = None
        schema_path = os.path.join(path, "values.schema.json")
        if os.path.exists(schema_path):
            with open(schema_path) as f:
                try:
                    self.schema = json.load(f)
                except ValueError as e:
                    self.errors.append(f"values.schema.json: {e}")
            if self.schema is not None:
                self.errors.extend(schema_undescribed(self.schema, self.schema, self.defaults))
                self.errors.extend(validate_schema(self.schema, self.defaults, "values.yaml"))

        tdir = os.path.join(path, "templates")
        sources = {}
        for fname in sorted(os.listdir(tdir)):
            if fname.endswith((".yaml", ".tpl", ".yml")) or fname == "NOTES.txt":
                with open(os.path.join(tdir, fname)) as f:
                    sources[f"{self.meta['name']}/templates/{fname}"] = f.read()

        # Every .Values path named in a template must exist in values.yaml.
        for name, src in sources.items():
            for m in VALUES_REF.finditer(src):
                vpath = m.group(1).strip(".").split(".")
                if not values_paths_defined(self.defaults, vpath):
                    line = src[: m.start()].count("\n") + 1
                    self.errors.append(f"{name}:{line}: .Values.{'.'.join(vpath)} is not "
                                       "defined in values.yaml")

        self.templates = {}
        self.trees = {}
        for name, src in sources.items():
            try:
                tree = build_tree(lex(src, name), name)
            except TemplateError as e:
                self.errors.append(str(e))
                continue
            self.trees[name] = tree
            self.templates[name] = tree
            collect_defines(tree, self.templates)

    def values(self, files, errors):
        """values.yaml with the files over it, as Helm coalesces them."""
        values = copy.deepcopy(self.defaults)
        schema = self.schema
        for path in files:
            override = load_yaml_file(path, errors)

            # An override may only set keys the chart knows, in values.yaml or in the schema
            # (a typo would be silently ignored); a map that is empty in values.yaml (a
            # service's `config: {}`), or that the schema says holds free keys
            # (podAnnotations), takes any.
            def check(o, d, node, prefix):
                if isinstance(d, dict) and not d or node is not None and free_map(schema, node):
                    return
                node = resolve(schema, node) if node is not None else None
                for k, v in o.items():
                    if node and k in node.get("properties", {}) and (
                            not isinstance(d, dict) or k not in d):
                        continue  # described by the schema, no default in values.yaml
                    if not isinstance(d, dict) or k not in d:
                        errors.append(f"{path}: {prefix}{k} is not a value of the chart")
                    elif isinstance(v, dict) and isinstance(d[k], dict):
                        sub = node.get("properties", {}).get(k) if node else None
                        check(v, d[k], sub, f"{prefix}{k}.")
            if isinstance(override, dict):
                check(override, self.defaults, schema, "")
                merge(values, override)
            else:
                errors.append(f"{path}: a values file must be a map")
        if schema is not None and files:
            errors.extend(validate_schema(schema, values, " + ".join(files)))
        return values

    def render(self, files, release, namespace, out):
        """Renders into `out`; returns the errors (none: everything rendered and parsed)."""
        errors = []
        values = self.values(files, errors)
        try:
            held = helm_values(values)
        except TemplateError as e:
            errors.append(str(e))
            held = {}
        top = {
            "Values": held,
            "Release": {"Name": release, "Namespace": namespace, "Service": "Helm",
                        "IsInstall": True, "IsUpgrade": False, "Revision": 1},
            "Chart": {"Name": self.meta["name"], "Version": self.meta["version"],
                      "AppVersion": self.meta.get("appVersion", ""),
                      "Description": self.meta.get("description", ""),
                      "KubeVersion": self.meta.get("kubeVersion", ""),
                      "Type": self.meta.get("type", "")},
            "Capabilities": {"KubeVersion": {"Version": self.kube_version,
                                             "GitVersion": self.kube_version,
                                             "Major": str(self.kube.major),
                                             "Minor": str(self.kube.minor)}},
        }
        # Reading a key the merged values lack is an error unless values.yaml names it (an
        # override's null deletes a key, as in Helm, and then it reads as nil).
        strict = {}

        def mark(d, known):
            if isinstance(d, dict):
                strict[id(d)] = set(known) if isinstance(known, dict) else set()
                for k, v in d.items():
                    mark(v, known.get(k) if isinstance(known, dict) and known.get(k) else {})
        mark(held, self.defaults)
        renderer = Renderer(dict(self.templates), strict)

        os.makedirs(os.path.join(out, "config"), exist_ok=True)
        with open(os.path.join(out, "values.json"), "w") as f:
            json.dump(json_ready(held), f, sort_keys=True)
        manifest = []
        for name, tree in self.trees.items():
            base = os.path.basename(name)
            if base.startswith("_"):
                continue
            top["Template"] = {"Name": name, "BasePath": f"{self.meta['name']}/templates"}
            try:
                text = renderer.execute(name, top, name)
            except TemplateError as e:
                errors.append(str(e))
                continue
            except RecursionError:
                errors.append(f"{name}: templates include each other too deeply")
                continue
            with open(os.path.join(out, base), "w") as f:
                f.write(text)
            if base == "NOTES.txt":
                continue  # text for the person installing, not a manifest
            try:
                docs = [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]
            except yaml.YAMLError as e:
                errors.append(f"{name}: rendered output is not YAML: {e}")
                continue
            for doc in docs:
                if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                    errors.append(f"{name}: a rendered document has no kind/apiVersion: "
                                  f"{doc!r:.200}")
                    continue
                manifest.append({"template": name, "object": doc})
                if doc["kind"] == "ConfigMap":
                    for key, data in (doc.get("data") or {}).items():
                        try:
                            yaml.load(data, Loader=StrictLoader)
                        except yaml.YAMLError as e:
                            errors.append(f"{name}: ConfigMap key {key} is not YAML: {e}")
                        with open(os.path.join(out, "config", key), "w") as f:
                            f.write(data)
        with open(os.path.join(out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True, default=str)
        with open(os.path.join(out, "errors.txt"), "w") as f:
            f.write("".join(e + "\n" for e in errors))
        return errors, manifest


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chart")
    ap.add_argument("out")
    ap.add_argument("-f", "--values", action="append", default=[])
    ap.add_argument("--release", default="goodput")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--kube-version", default="v1.29.0")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=FILE",
                    help="also render with FILE over the -f files, into OUT/variants/NAME")
    opts = ap.parse_args()

    chart = Chart(opts.chart, opts.kube_version)
    errors = list(chart.errors)
    os.makedirs(opts.out, exist_ok=True)
    with open(os.path.join(opts.out, "value_paths.json"), "w") as f:
        json.dump(value_paths(chart.schema, chart.schema, chart.defaults), f, indent=1)
    found, manifest = chart.render(opts.values, opts.release, opts.namespace, opts.out)
    errors.extend(found)
    for variant in opts.variant:
        name, sep, path = variant.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            errors.append(f"--variant {variant}: give NAME=FILE")
            continue
        found, _ = chart.render(opts.values + [path], opts.release, opts.namespace,
                                os.path.join(opts.out, "variants", name))
        errors.extend(f"variant {name}: {e}" for e in found)
    if errors:
        for e in errors:
            print(f"render_chart: {e}", file=sys.stderr)
        return 1
    kinds = sorted(f"{m['object']['kind']}/{m['object']['metadata']['name']}" for m in manifest)
    print(f"rendered {len(manifest)} objects: {', '.join(kinds)}"
          + (f" and {len(opts.variant)} variants" if opts.variant else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
