"""The chart renderer agrees with Go templates and helm on the subset the chart uses.

Expected outputs are what text/template with Sprig (as helm runs it) prints for the same
template; each case names the Go behaviour it pins.
"""

from __future__ import annotations

import pytest

from deploy.render_chart import (
    Renderer,
    TemplateError,
    as_float64,
    go_number,
    lex,
    merge_values,
    parse,
)


def render(source: str, dot=None, helpers: str = "") -> str:
    defines: dict = {}
    parse(lex(helpers, "_helpers.tpl"), defines)
    nodes = parse(lex(source, "t.yaml"), defines)
    dot = as_float64(dot if dot is not None else {})
    return Renderer(defines).render(nodes, dot, {"$": dot})


def test_trim_markers_remove_whitespace_and_newlines_on_their_side_only():
    assert render("a  \n  {{- 1 }}  \n  b") == "a1  \n  b"
    assert render("a  {{ 1 -}}  \n  b") == "a  1b"
    assert render("x\n{{- /* a comment */ -}}\ny") == "xy"


def test_if_else_if_else_and_go_truth():
    source = "{{ if .a }}A{{ else if .b }}B{{ else }}C{{ end }}"
    assert render(source, {"a": "x"}) == "A"
    assert render(source, {"a": "", "b": [1]}) == "B"
    assert render(source, {"a": 0, "b": {}}) == "C"
    assert render(source, {}) == "C"


def test_with_rebinds_dot_and_range_walks_maps_in_key_order():
    assert render("{{ with .m }}{{ .k }}{{ else }}none{{ end }}", {"m": {"k": "v"}}) == "v"
    assert render("{{ with .m }}{{ .k }}{{ else }}none{{ end }}", {"m": {}}) == "none"
    assert render("{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}", {"m": {"b": 2, "a": 1}}) == "a=1;b=2;"
    assert render("{{ range .l }}[{{ . }}]{{ end }}", {"l": ["x", "y"]}) == "[x][y]"
    assert render("{{ range .l }}{{ $.top }}{{ end }}", {"l": [1, 2], "top": "T"}) == "TT"


def test_include_nindent_and_indent_follow_sprig():
    helpers = '{{- define "two" -}}\na: 1\nb: 2\n{{- end -}}'
    assert render('x:\n  {{- include "two" . | nindent 2 }}', helpers=helpers) == "x:\n  a: 1\n  b: 2"
    assert render('{{ include "two" . | indent 3 }}', helpers=helpers) == "   a: 1\n   b: 2"


def test_include_sets_dollar_to_its_argument():
    helpers = '{{- define "name" -}}{{ $.n }}{{- end -}}'
    assert render('{{ include "name" (dict "n" "inner") }}', {"n": "outer"}, helpers) == "inner"


def test_default_quote_required_and_printf():
    assert render('{{ .x | default "d" }}', {"x": ""}) == "d"
    assert render('{{ .x | default "d" }}', {"x": "v"}) == "v"
    assert render("{{ .x | quote }}", {"x": 'say "hi"\n'}) == '"say \\"hi\\"\\n"'
    assert render("{{ .missing | quote }}", {}) == ""
    assert render('{{ printf "%s-%d-%v" "a" 3 .f }}', {"f": 2.5}) == "a-3-2.5"
    with pytest.raises(TemplateError, match="give me x"):
        render('{{ required "give me x" .x }}', {"x": ""})


def test_trunc_trim_suffix_contains_and_comparisons():
    assert render('{{ "abcdef" | trunc 3 }}') == "abc"
    assert render('{{ "name-" | trimSuffix "-" }}') == "name"
    assert render('{{ if contains "portal" .r }}yes{{ end }}', {"r": "gpu-portal-prod"}) == "yes"
    assert render("{{ if gt (int .n) 1 }}many{{ end }}", {"n": 2}) == "many"
    assert render("{{ if and .a (not .b) }}ok{{ end }}", {"a": 1, "b": False}) == "ok"
    assert render('{{ if eq .s "x" "y" }}in{{ end }}', {"s": "y"}) == "in"


def test_to_yaml_sorts_keys_without_a_trailing_newline_and_to_json_is_compact():
    assert render("{{ toYaml .m }}", {"m": {"b": 1, "a": {"c": [1, 2]}}}) == "a:\n  c:\n  - 1\n  - 2\nb: 1"
    assert render("{{ toYaml .m }}", {"m": {}}) == "{}"
    assert render("{{ toJson .m }}", {"m": {"g": ["t", "member"], "a": "<&>"}}) == (
        '{"a":"\\u003c\\u0026\\u003e","g":["t","member"]}'
    )


def test_numbers_from_values_print_as_go_float64s():
    assert [go_number(n) for n in (2, 600, 0.5, 123456, 1000000, 1500000, 0.00001, -3)] == [
        "2",
        "600",
        "0.5",
        "123456",
        "1e+06",
        "1.5e+06",
        "1e-05",
        "-3",
    ]
    assert render("{{ .n }}", {"n": 1000000}) == "1e+06"


def test_a_field_of_a_missing_value_is_an_error_as_in_go():
    assert render("[{{ .a.missing }}]", {"a": {}}) == "[]"
    with pytest.raises(TemplateError, match="nil pointer evaluating .a.b"):
        render("{{ .a.b.c }}", {"a": {}})


def test_anything_outside_the_subset_is_refused_by_name():
    with pytest.raises(TemplateError, match="'lookup' is outside"):
        render('{{ lookup "v1" "Secret" "ns" "name" }}')
    with pytest.raises(TemplateError, match="'template' is outside"):
        render('{{ template "x" . }}')
    with pytest.raises(TemplateError, match="printing a dict"):
        render("{{ .m }}", {"m": {"a": 1}})


def test_values_merge_like_helm():
    base = {"a": {"b": 1, "c": 2}, "l": [1, 2], "d": "x"}
    assert merge_values(base, {"a": {"c": 3}, "l": [9], "d": None}) == {"a": {"b": 1, "c": 3}, "l": [9]}
