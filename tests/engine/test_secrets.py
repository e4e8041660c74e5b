"""Secret names, masking for display, and scrubbing of secret values from text."""
from __future__ import annotations

import pytest

from fleetops.engine.secrets import MASK, collect_secret_values, is_secret_name, mask, scrub


@pytest.mark.parametrize("name", [
    "password", "db_password", "DB_PASSWORD", "ssh_passphrase", "api_token", "TokenFile", "client_secret",
    "aws_secret_access_key", "private_key", "ansible_ssh_private_key_file", "KEY", "ansible_ssh_pass",
    "ansible_become_pass", "Ansible_SSH_Pass", "apikey", "apiKey", "GITHUB_TOKEN", "authtoken", "ssh_key",
])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["user", "ansible_host", "pass", "passwd_hint_not", "port", "hermes_home", "", 5,
                                  None, "ansible_ssh_passx",
                                  # result fields that merely contain the letters
                                  "tokenizer", "index_tokens", "docsize_tokens", "distinct_keys", "keys",
                                  "keyword"])
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
        "short_token": "abc",                     # too short to scrub safely
        "port_key": 2222,                         # not a string
        "app": {"name": "hermes", "api_token": "tok-9876", "nested": [{"secret": "s3cr3t!"}]},
        "vault_secret": {"a": "valueA", "b": ["valueB", 7]},
        "user": "hermes",
    }
    assert collect_secret_values(variables) == {"hunter22", "tok-9876", "s3cr3t!", "valueA", "valueB"}


def test_scrub_replaces_every_occurrence():
    text = "login hunter22 failed; retry with hunter22 and tok-9876"
    assert scrub(text, {"hunter22", "tok-9876"}) == "login ******** failed; retry with ******** and ********"


def test_scrub_longest_first_so_overlaps_vanish_whole():
    assert scrub("key=abcdefgh", {"abcd", "abcdefgh"}) == "key=********"


def test_scrub_without_secrets_returns_text():
    assert scrub("nothing here", set()) == "nothing here"
    assert scrub("", {"hunter22"}) == ""
    assert scrub("a b", {""}) == "a b"
