"""A lookup's relative file found as ansible-core's DataLoader.path_dwim_relative_stack finds it,
over the task's ansible_search_path (the role, the task's own folder, the playbook's)."""
from __future__ import annotations

from fleetops.engine.templating.lookups import LookupEnv


def _tree(tmp_path):
    role = tmp_path / "roles" / "r"
    for rel in ("tasks/default.yml", "tasks/sub/x.yml", "files/data.txt", "data.txt", "tasks/sub/own.yml"):
        (role / rel).parent.mkdir(parents=True, exist_ok=True)
        (role / rel).write_text(rel)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "play.txt").write_text("play")
    return role


def test_a_role_task_finds_its_tasks_folder_then_files_then_the_playbook(tmp_path):
    role = _tree(tmp_path)
    env = LookupEnv({"ansible_search_path": [str(role), str(role / "tasks"), str(tmp_path)]})
    assert env.find("files", "default.yml") == str(role / "tasks" / "default.yml")
    assert env.find("files", "data.txt") == str(role / "files" / "data.txt")     # files/ before the bare name
    assert env.find("files", "play.txt") == str(tmp_path / "files" / "play.txt")
    assert env.find("files", "nosuch.yml", must=False) is None


def test_from_a_nested_tasks_folder_the_role_folders_come_first(tmp_path):
    role = _tree(tmp_path)
    env = LookupEnv({"ansible_search_path": [str(role / "tasks" / "sub")]})
    assert env.find("files", "data.txt") == str(role / "files" / "data.txt")
    assert env.find("files", "default.yml") == str(role / "tasks" / "default.yml")
    assert env.find("files", "own.yml") == str(role / "tasks" / "sub" / "own.yml")


def test_without_a_search_path_the_role_and_the_playbook(tmp_path):
    role = _tree(tmp_path)
    env = LookupEnv({"role_path": str(role), "playbook_dir": str(tmp_path)})
    assert env.find("files", "data.txt") == str(role / "files" / "data.txt")
    assert env.find("files", "play.txt") == str(tmp_path / "files" / "play.txt")
