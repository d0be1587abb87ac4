"""The pages' JSON viewer (``agentops.json_view.json_tree``): readable, foldable, escaped."""

import json

from agentops.json_view import (
    COPY_BUTTON,
    JSON_TREE_FOLD_BYTES,
    JSON_TREE_MAX_CHARS,
    JSON_TREE_MAX_DEPTH,
    JSON_TREE_MAX_ENTRIES,
    JSON_TREE_MAX_NODES,
    JSON_TREE_OPEN_DEPTH,
    PRETTY_JSON_MAX_CHARS,
    PRETTY_JSON_MAX_DEPTH,
    json_tree,
    pretty_json,
)


def test_strings_holding_json_are_shown_parsed_and_every_text_is_escaped():
    html = str(json_tree({"<k>": json.dumps({"name": "</details><script>x</script>"})}))
    assert '<span class="j-key">&lt;k&gt;</span>' in html
    assert 'class="j-note j-json"' in html
    assert '<span class="j-key">name</span>' in html
    assert "&lt;/details&gt;&lt;script&gt;" in html
    assert "<script>" not in html
    assert html.count("<details") == html.count("</details>") == 2


def test_scalars_and_text_that_is_not_json_stay_as_they_are():
    assert str(json_tree("{not json")) == (
        f'<div class="json-tree">{COPY_BUTTON}<span class="j-str">"{{not json"</span></div>'
    )
    assert str(json_tree([1.5, None, False])).count("<li>") == 3
    assert '<span class="j-punct">{}</span>' in str(json_tree({}))


def test_deep_and_long_values_start_folded():
    deep: object = "leaf"
    for _ in range(JSON_TREE_OPEN_DEPTH + 1):
        deep = {"k": deep}
    html = str(json_tree(deep))
    assert html.count('<details class="j-node" open>') == JSON_TREE_OPEN_DEPTH
    assert '<details class="j-node">' in str(json_tree(list(range(30))))


def _nested(depth: int) -> object:
    value: object = "<b>leaf</b>"
    for _ in range(depth):
        value = {"k": [value]}
    return value


def test_values_past_the_bounds_are_left_out_with_a_note():
    html = str(json_tree(_nested(2500)))  # 5,000 levels: past Python's recursion limit
    assert html.count("<details") == JSON_TREE_MAX_DEPTH
    assert f"nested deeper than {JSON_TREE_MAX_DEPTH} levels: not shown" in html
    assert "leaf" not in html

    html = str(json_tree(list(range(JSON_TREE_MAX_ENTRIES + 5))))
    assert html.count("<li>") == JSON_TREE_MAX_ENTRIES + 1
    assert "… 5 more items not shown" in html

    html = str(json_tree([[0] * JSON_TREE_MAX_ENTRIES] * JSON_TREE_MAX_ENTRIES))
    assert html.count('<span class="j-num">0</span>') < JSON_TREE_MAX_NODES

    html = str(json_tree("<" * (JSON_TREE_MAX_CHARS + 7)))
    assert html.count("&lt;") == JSON_TREE_MAX_CHARS
    assert "… 7 more characters" in html


def test_text_of_json_too_deep_to_parse_is_shown_as_text():
    text = "[" * 5000 + "]" * 5000
    assert str(json_tree(text)) == (
        f'<div class="json-tree">{COPY_BUTTON}<span class="j-str">"{text}"</span></div>'
    )


def test_every_value_has_a_copy_button_and_large_values_fold_with_their_size():
    html = str(json_tree({"a": [1, "two", None], "b": {}}))
    # The object, "a", its three items and "b": six values, six buttons.
    assert html.count(COPY_BUTTON) == 6
    assert html.index(COPY_BUTTON) < html.index("<details")

    big = {"rows": [{"n": i, "text": "x" * 50} for i in range(JSON_TREE_FOLD_BYTES // 50)]}
    size = len(json.dumps(big, separators=(",", ":")))
    html = str(json_tree(big))
    assert html.startswith(f'<div class="json-tree">{COPY_BUTTON}<details class="j-node"><summary>')
    assert f"1 key, {size / 1000:.1f} kB" in html
    # Small values start open, without a size.
    assert '<details class="j-node" open>' in str(json_tree({"a": 1}))
    assert " B<" not in str(json_tree({"a": 1}))


def test_what_the_bounds_leave_out_is_marked_for_the_copy_button():
    html = str(json_tree(list(range(JSON_TREE_MAX_ENTRIES + 1))))
    assert '<span class="j-note j-cut">… 1 more items not shown</span>' in html
    assert 'j-cut">… 3 more characters' in str(json_tree("y" * (JSON_TREE_MAX_CHARS + 3)))


def test_pretty_json_prints_values_too_deep_for_json_with_a_note():
    printed = pretty_json(_nested(2500))
    assert f'"… nested deeper than {PRETTY_JSON_MAX_DEPTH} levels: not shown"' in printed
    assert "leaf" not in printed
    assert json.loads(printed)["k"][0]["k"][0]["k"][0]["k"]
    # What orjson refuses for other reasons is still printed whole.
    assert json.loads(pretty_json({"big": 2**70, 1: [1]})) == {"big": 2**70, "1": [1]}


def test_pretty_json_cuts_long_text_unless_told_not_to():
    value = {"text": "x" * PRETTY_JSON_MAX_CHARS}
    whole = pretty_json(value, limit=None)
    assert json.loads(whole) == value
    more = len(whole) - PRETTY_JSON_MAX_CHARS
    cut = f"{whole[:PRETTY_JSON_MAX_CHARS]}\n… {more} more characters not shown"
    assert pretty_json(value) == cut
    assert pretty_json({"a": 1}) == '{\n  "a": 1\n}'
