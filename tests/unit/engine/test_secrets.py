"""Secret names, masking for display, and scrubbing of secret values from text."""
from __future__ import annotations

import pytest

from fleetops.engine.secrets import MASK, collect_secret_values, is_secret_name, mask, scrub


@pytest.mark.parametrize("name", [
    "password", "db_password", "DB_PASSWORD", "ssh_passphrase", "api_token", "TokenFile", "client_secret",
    "aws_secret_access_key", "private_key", "ansible_ssh_private_key_file", "ansible_ssh_pass",
    "ansible_become_pass", "Ansible_SSH_Pass", "apikey", "apiKey", "GITHUB_TOKEN", "authtoken", "ssh_key",
    "mysql_root_passwd", "dbpassword", "key2", "vault.secret",
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["user", "ansible_host", "pass", "port", "hermes_home", "", 5,
                                  # real inventories' names whose words only contain the letters
                                  "valkey_sentinel_monitor_name", "monkey_patch", "turkey", "keystone_admin_user",
                                  "passwordless_sudo", "secretary", "tokenize",
                                  None, "ansible_ssh_passx",
                                  # result fields that merely contain the letters
                                  "tokenizer", "index_tokens", "docsize_tokens", "distinct_keys", "keys",
                                  "keyword",
                                  # a mapping entry's key (dict2items, with_dict's item.key)
                                  "key", "KEY"])
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_mask_is_a_deep_copy_with_secret_values_hidden():
    original = {
        "user": "ops",
        "db_password": "hunter22",
        "api": {"token": 12345, "url": "https://x"},
        "backends": [{"name": "a", "secret": ["s1", "s2"]}, "plain", [{"passphrase": "pp"}]],
        "empty_key": "",
        "unset_token": None,
    }
    masked = mask(original)
    assert masked == {
        "user": "ops",
        "db_password": MASK,
        "api": {"token": MASK, "url": "https://x"},
        "backends": [{"name": "a", "secret": MASK}, "plain", [{"passphrase": MASK}]],
        "empty_key": "",
        "unset_token": None,
    }
    assert original["db_password"] == "hunter22" and original["backends"][0]["secret"] == ["s1", "s2"]
    masked["api"]["url"] = "changed"
    assert original["api"]["url"] == "https://x"


def test_mask_plain_values_and_lists():
    assert mask("hunter22") == "hunter22"
    assert mask([{"token": "abcd"}, 3]) == [{"token": MASK}, 3]
    assert MASK == "********"


def test_collect_secret_values_walks_nested_data():
    variables = {
        "db_password": "hunter22",
        "short_token": "abc",                     # short: still a secret
        "port_key": 2222,                         # a number: as a template prints it
        "pin_secret": 1.5,
        "app": {"name": "hermes", "api_token": "tok-9876", "nested": [{"secret": "s3cr3t!"}]},
        "vault_secret": {"a": "valueA", "b": ["valueB", 7]},
        "user": "hermes",
        "use_key": True, "no_token": None, "empty_password": "",   # hide nothing
        "ansible_ssh_private_key_file": "/keys/id",                # a location, masked by name only
    }
    assert collect_secret_values(variables) == {"hunter22", "abc", "2222", "1.5", "tok-9876", "s3cr3t!",
                                                 "valueA", "valueB", "7"}


def test_scrub_replaces_every_occurrence():
    text = "login hunter22 failed; retry with hunter22 and tok-9876"
    assert scrub(text, {"hunter22", "tok-9876"}) == "login ******** failed; retry with ******** and ********"


def test_scrub_longest_first_so_overlaps_vanish_whole():
    assert scrub("key=abcdefgh", {"abcd", "abcdefgh"}) == "key=********"


def test_scrub_without_secrets_returns_text():
    assert scrub("nothing here", set()) == "nothing here"
    assert scrub("", {"hunter22"}) == ""
    assert scrub("a b", {""}) == "a b"


def test_scrub_masks_values_where_they_stand_as_values_only():
    # a password `admin` leaves the name admin_user and the word administrator alone
    assert scrub("admin_user=admin; administrator: admin.", {"admin"}) == "admin_user=********; administrator: ********."
    assert scrub("echo 12345678 abc abcdef 9123456789", {"12345678", "abc"}) == "echo ******** ******** abcdef 9123456789"
    assert scrub("u:p@ss!@host", {"p@ss!"}) == "u:********@host"
    assert scrub("postgres://u:abc@h/db", {"abc"}) == "postgres://u:********@h/db"


def test_derived_values_follow_templates_made_from_secrets():
    from fleetops.engine.secrets import derived_values
    from fleetops.engine.templating import Templar

    variables = {"pin_secret": "abc", "plain": "abc", "user": "ops", "creds": {"db_password": 1234}}
    args = {"cmd": "echo {{ pin_secret | b64encode }} {{ user | upper }}",
            "nested": ["{{ creds.db_password * 2 }}", {"x": "{{ plain | upper }}"}]}
    found = derived_values(Templar(), args, variables, {"abc"})
    assert found == {"YWJj", "2468", "ABC"}            # not OPS: user is neither secret nor holds one


def test_clean_keeps_names_and_host_keyed_stats():
    from fleetops.engine.clean import clean, clean_per_host

    doc = {"admin": "admin", "x": {"admin_user": "admin"}}
    assert clean(doc, {"admin"}) == {"admin": MASK, "x": {"admin_user": MASK}}
    # hosts named like secrets are still hosts: their counters are not masked away
    stats = {"keyhost-01": {"ok": 1}, "password-vault": {"ok": 2}, "key": {"ok": 3}}
    assert clean_per_host(stats, {"x"}) == stats


def test_a_secret_glued_into_a_word_masks_the_word():
    from fleetops.engine.secrets import derived_values
    from fleetops.engine.templating import Templar

    found = derived_values(Templar(), "echo id{{ db_password }} x={{ db_password }}", {"db_password": "hunter2"}, set())
    assert found == {"hunter2", "idhunter2"}
    assert scrub("idhunter2 x=hunter2", found) == "******** x=********"


def test_skipped_names_are_not_looked_into():
    """The engine's magic variables hold host and group names: a group called `secret` must not
    make its hosts' names secret values (scrubbed from every line)."""
    variables = {"groups": {"secret": ["web1"], "all": ["web1"]}, "db_password": "hunter2"}
    assert collect_secret_values(variables) == {"web1", "hunter2"}
    assert collect_secret_values(variables, skip=frozenset({"groups"})) == {"hunter2"}
