"""A set never chooses where a credential goes: `otbench online` against recording servers on 127.0.0.1.

The set records a served engine at server A with its key in `$OTBENCH_TEST_KEY`;
the user's server is B. Whatever the command line, A never receives a request
carrying an Authorization header; B receives the key only when the user names B
and the key variable on the command line.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _bad_input import refused  # noqa: E402
from _served import Recorder, served_set, tokenizer_folder  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from otbench.cli import main  # noqa: E402

KEY = "sk-test-0123456789"


@pytest.fixture
def servers(tmp_path):
    recorded, user = Recorder(), Recorder()
    s = served_set(tmp_path / "s", recorded.url, tokenizer_folder(tmp_path / "tok"))
    yield s, recorded, user
    recorded.close()
    user.close()


def _run(*argv, key=KEY):
    return CliRunner().invoke(main, [str(a) for a in argv], env={"OTBENCH_TEST_KEY": key})


@pytest.mark.parametrize("method", ["thinkbrake-onectx", "deer"])
def test_the_recorded_address_gets_no_request_without_consent(servers, method):
    s, recorded, _ = servers
    for cmd in ("certify", "run"):
        refused(_run("online", cmd, s, "--theta", "0", "--method", method),
                "--base-url", "never sent a key")
    assert recorded.requests == []


def test_the_recorded_address_with_consent_gets_no_credential(servers):
    s, recorded, user = servers
    refused(_run("online", "certify", s, "--theta", "0", "--base-url", "recorded"),
            "cannot serve STP exactly")
    assert recorded.requests and recorded.credentialed() == []
    refused(_run("online", "certify", s, "--theta", "0", "--base-url", "recorded",
                 "--api-key-env", "OTBENCH_TEST_KEY"), "never sent a key")
    assert recorded.credentialed() == [] and user.requests == []


def test_the_key_goes_only_to_the_server_the_user_names(servers):
    s, recorded, user = servers
    refused(_run("online", "certify", s, "--theta", "0", "--base-url", user.url), "cannot serve")
    assert user.requests and user.credentialed() == []          # no key variable named: no key
    refused(_run("online", "certify", s, "--theta", "0", "--base-url", user.url,
                 "--api-key-env", "OTBENCH_TEST_KEY"), "cannot serve")
    assert {r["headers"]["authorization"] for r in user.credentialed()} == {f"Bearer {KEY}"}
    assert recorded.requests == []


def test_a_key_with_cr_lf_is_one_line_and_never_shown(servers):
    s, recorded, user = servers
    bad = "sk-se\r\ncret-part"
    r = _run("online", "certify", s, "--theta", "0", "--base-url", user.url,
             "--api-key-env", "OTBENCH_TEST_KEY", key=bad)
    refused(r, "$OTBENCH_TEST_KEY", "not shown")
    assert "se" + "\r\ncret" not in r.output and "cret-part" not in r.output
    assert user.requests == [] and recorded.requests == []


def test_validate_flags_an_edited_address(servers, tmp_path):
    s, recorded, _ = servers
    assert _run("validate", s).exit_code == 0
    m = s / "manifest.json"
    doc = json.loads(m.read_text())
    doc["provenance"]["engine"]["config"]["base_url"] = "http://127.0.0.1:9"
    m.write_text(json.dumps(doc))
    refused(_run("validate", s), "provenance does not match its provenance_hash")
    doc.pop("provenance_hash")
    m.write_text(json.dumps(doc))
    refused(_run("validate", s), "no provenance_hash binds it")
    refused(_run("online", "certify", s, "--theta", "0", "--base-url", "recorded"), "provenance")
    assert recorded.requests == []
