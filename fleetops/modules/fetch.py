"""`fetch`: copy one host file into the run's results folder, `<results>/<run-id>/<host>/`.

Fetched files live beside the run's record so `fleetops report` and a later
investigation find them with the run, never scattered over the controller.
"""
from __future__ import annotations

import base64
import hashlib
import os

from fleetops.engine.module import Arg, Module, TaskContext, result


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Fetch(Module):
    name = "fetch"
    args = {
        "src": Arg(str, required=True),
        "dest": Arg(str),
        "fail_on_missing": Arg(bool, default=True),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        src = str(args["src"])
        name = str(args.get("dest") or os.path.basename(src.rstrip("/")))
        rel = os.path.normpath(name)
        if os.path.isabs(name) or rel == ".." or rel.startswith("../") or rel in ("", "."):
            return result(failed=True, msg=f"dest {name!r} must be a relative name inside the run's host folder")
        local = os.path.join(ctx.host_dir, rel)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        before = _sha256(local)
        tmp = f"{local}.fetching"
        try:
            if ctx.become_user or src.startswith("~"):
                # SFTP cannot sudo and does not expand ~: read it with the fetch payload instead
                res = ctx.payload("fetch", {"src": src})
                if res.get("failed"):
                    if res.get("missing"):
                        raise FileNotFoundError(src)
                    return res
                with open(tmp, "wb") as f:
                    f.write(base64.b64decode(res["content_b64"]))
            else:
                ctx.transport.get_file(src, tmp)
        except FileNotFoundError:
            _unlink(tmp)
            if args.get("fail_on_missing", True):
                return result(failed=True, msg=f"file not found on the host: {src}", src=src)
            return result(msg=f"file not found on the host: {src} (fail_on_missing is false)", src=src)
        except IsADirectoryError:
            _unlink(tmp)
            return result(failed=True, msg=f"{src} is a directory; fetch takes one file", src=src)
        except PermissionError as e:
            _unlink(tmp)
            return result(failed=True, msg=f"permission denied reading {src}: {e}", src=src)
        except BaseException:
            _unlink(tmp)
            raise
        if not os.path.exists(tmp):
            return result(failed=True, msg=f"fetch of {src} produced no file", src=src)
        host_sha = _sha256(tmp)
        scrubbed = _scrub_text_file(tmp, ctx.scrub)
        after = _sha256(tmp)
        os.replace(tmp, local)
        out = result(changed=after != before, msg=f"fetched {src}", src=src, dest=local, checksum=after)
        if scrubbed:
            out.update(scrubbed=True, host_checksum=host_sha,
                       msg=f"fetched {src} (secret values in it masked in the copy)")
        return out


def _scrub_text_file(path: str, scrub) -> bool:
    """Mask secret values in a fetched text file: the copy is part of the run's record, which
    holds no secret (the host keeps the original). Binary files (a database) are kept as they are."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    clean = scrub(text)
    if clean == text:
        return False
    with open(path, "w", encoding="utf-8") as f:
        f.write(clean)
    return True
