"""`fleetops run --shard` without a campaign on the lab: an empty shard runs nothing and exits 0,
the index read from a Kubernetes Indexed Job's variable picks the same hosts as --shard; bad
shard and campaign arguments are one line, exit 4, nothing contacted."""
from __future__ import annotations

import json

import pytest

from fleetops.engine.shards import owner
from tests.support.cli_run import fleetops, one_error_line, write, write_inventory

pytestmark = pytest.mark.lab
PB = "- hosts: all\n  gather_facts: false\n  tasks:\n    - command: echo hi\n"


def test_an_empty_shard_exits_0_and_the_environment_names_the_same_shard(lab, tmp_path):
    inv = write_inventory(tmp_path / "inv.yml", lab, [0])
    pb = write(tmp_path / "pb.yml", PB)
    name = lab.hosts[0]["name"]
    mine, empty = owner(name, 3), (owner(name, 3) + 1) % 3
    p = fleetops("run", pb, "-i", inv, "--shard", f"{empty}/3", "--results", tmp_path / "r", "--json", cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout)["stats"] == {}, p.stderr
    p = fleetops("run", pb, "-i", inv, "--shard-from-env", "--shard-count", "3", "--results", tmp_path / "r", "--json",
                 cwd=tmp_path, env_extra={"JOB_COMPLETION_INDEX": str(mine)})
    assert p.returncode == 0 and sorted(json.loads(p.stdout)["stats"]) == [name], p.stderr
    p = fleetops("run", pb, "-i", inv, "--shard-from-env", "MATRIX_INDEX", "--shard-count", "3", "--results",
                 tmp_path / "r", "--json", cwd=tmp_path, env_extra={"MATRIX_INDEX": str(empty)})
    assert p.returncode == 0 and json.loads(p.stdout)["stats"] == {}, p.stderr


@pytest.mark.parametrize("args, where", [
    (["--shard", "4/4"], "--shard"),
    (["--shard", "1/2", "--shard-from-env"], "--shard"),
    (["--shard-from-env"], "--shard-from-env"),
    (["--shard-count", "2"], "--shard-count"),
    (["--max-failures", "2"], "--max-failures"),
    (["--campaign", "c1", "--max-failures", "-1"], "--max-failures"),
    (["--campaign", "c1"], "--campaign"),                 # a SQLite store cannot coordinate a campaign
])
def test_bad_shard_arguments_are_one_line_and_contact_nothing(lab, tmp_path, args, where):
    inv = write_inventory(tmp_path / "inv.yml", lab, [0])
    pb = write(tmp_path / "pb.yml", PB)
    p = fleetops("run", pb, "-i", inv, "--results", tmp_path / "r", *args, cwd=tmp_path)
    assert p.returncode == 4
    assert one_error_line(p).startswith(f"fleetops: error: {where}: "), p.stderr
    assert not (tmp_path / "r").exists()


def test_shards_of_one_campaign_must_agree(lab, pg_url, tmp_path):
    inv = write_inventory(tmp_path / "inv.yml", lab, [0])
    pb = write(tmp_path / "pb.yml", PB)
    first = fleetops("run", pb, "-i", inv, "--campaign", "agree", "--results", pg_url, "--max-failures", "3",
                     cwd=tmp_path)                          # a campaign of one shard
    assert first.returncode == 0, first.stderr
    p = fleetops("run", pb, "-i", inv, "--shard", "1/3", "--campaign", "agree", "--results", pg_url, cwd=tmp_path)
    assert p.returncode == 4 and "start every shard alike" in one_error_line(p)
