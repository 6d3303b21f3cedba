"""Which prepared embedding model `defaults` keeps and which it exports again."""

from __future__ import annotations

import json

from ovgenai_models.defaults import prepared_weight_format


def prepared(folder, **config):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openvino_model.xml").write_text("<net/>")
    (folder / "embedding_config.json").write_text(json.dumps({"name": "m", **config}))
    return folder


def test_reads_the_recorded_weight_format(tmp_path):
    assert prepared_weight_format(prepared(tmp_path / "m", weight_format="int8")) == "int8"


def test_a_model_from_before_formats_were_recorded_counts_as_unknown(tmp_path):
    assert prepared_weight_format(prepared(tmp_path / "m")) is None


def test_a_missing_or_half_written_model_is_not_prepared(tmp_path):
    assert prepared_weight_format(tmp_path / "absent") is None
    folder = prepared(tmp_path / "m", weight_format="int8")
    (folder / "openvino_model.xml").unlink()
    assert prepared_weight_format(folder) is None


def test_an_older_default_graph_is_brought_up_to_date_an_edited_one_is_kept(tmp_path):
    from ovgenai_models.defaults import _OLD_GRAPH_OPTIONS, mend_graph
    from ovgenai_models.repository import graph_pbtxt, parse_graph_options

    old, edited = tmp_path / "old.pbtxt", tmp_path / "edited.pbtxt"
    old.write_text(graph_pbtxt(_OLD_GRAPH_OPTIONS))
    edited.write_text(graph_pbtxt({**_OLD_GRAPH_OPTIONS, "cache_size": 4}))
    mend_graph(old)
    mend_graph(edited)
    assert parse_graph_options(old.read_text()) == {"models_path": "./"}
    assert parse_graph_options(edited.read_text())["cache_size"] == 4
