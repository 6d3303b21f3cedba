"""The engine's cores and the serving core (engine/api_process/placement.py): the plan for the cores this process may
use and its CPU quota, and pinning. The specs placed by it: test_app.py (placed); the thread count they give OpenVINO:
engine/test_spec.py."""

from __future__ import annotations

from ovgenai_server.engine.api_process.placement import RESERVE_FROM_CORES, cpu_quota, plan


def test_auto_reserves_the_last_core_only_from_eight():
    assert plan(tuple(range(RESERVE_FROM_CORES - 1)), "auto").engine_cores is None
    sixteen = plan(tuple(range(16)), "auto")
    assert sixteen.engine_cores == tuple(range(15)) and sixteen.serving_cores == (15,)


def test_auto_leaves_cores_shared_by_quota_alone(tmp_path):
    assert plan(tuple(range(64)), "auto", quota=8.0).engine_cores is None  # 64 visible, 8 by quota: none its own
    assert plan(tuple(range(16)), "auto", quota=16.0).engine_cores == tuple(range(15))
    assert plan(tuple(range(64)), "reserved", quota=8.0).engine_cores == tuple(range(63))  # as the user says
    (tmp_path / "cpu.max").write_text("800000 100000\n")
    assert cpu_quota(tmp_path) == 8.0
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(tmp_path) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("150000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_quota(tmp_path) == 1.5
    assert cpu_quota(tmp_path / "absent") is None


def test_the_user_chooses_and_one_core_is_always_shared():
    assert plan((0, 1), "reserved").engine_cores == (0,)
    assert plan((4, 9, 10, 11), "reserved").describe() == "engine on cores 4,9-10, serving on 11"
    assert plan(tuple(range(16)), "shared").engine_cores is None
    assert plan((3,), "reserved").engine_cores is None  # nothing would be left to compute on
