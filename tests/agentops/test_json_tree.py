"""The inbox's JSON view (``agentops.jinja2.json_tree``): readable, foldable, escaped."""

import json

from agentops.jinja2 import JSON_TREE_OPEN_DEPTH, json_tree


def test_strings_holding_json_are_shown_parsed_and_every_text_is_escaped():
    html = str(json_tree({"<k>": json.dumps({"name": "</details><script>x</script>"})}))
    assert '<span class="j-key">&lt;k&gt;</span>' in html
    assert 'class="j-note"' in html
    assert '<span class="j-key">name</span>' in html
    assert "&lt;/details&gt;&lt;script&gt;" in html
    assert "<script>" not in html
    assert html.count("<details") == html.count("</details>") == 2


def test_scalars_and_text_that_is_not_json_stay_as_they_are():
    assert str(json_tree("{not json")) == (
        '<div class="json-tree"><span class="j-str">"{not json"</span></div>'
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
