#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the container image's runtime stage for real, without a container
engine: proves that the Dockerfile's runtime package list is complete.

usage: runtime_rootfs.py --build BUILD_DIR [--dockerfile FILE] [--cache DIR]
                         [--events N] [--keep] [--without PACKAGE]

1. Reads deploy/Dockerfile: the Debian release of the final stage's FROM,
   the packages of its `apt-get install`, and the build stage's DESTDIR and
   install prefix. Nothing of the image is restated here, so this check
   follows the Dockerfile and cannot drift from it.
2. Builds a Debian root file system with mmdebstrap (variant minbase, the
   base of the -slim images) holding exactly those packages. The tarball is
   cached in --cache, keyed by release and package list; delete it to pick
   up newer point-release packages.
3. Installs BUILD_DIR (`cmake --install` into a temporary DESTDIR) and
   replays the final stage on the extracted tree: RUN commands inside it
   with chroot (apt-get commands excepted: mmdebstrap installed the
   packages), COPY --from=<build stage> from the DESTDIR, WORKDIR, ENV, USER
   and ENTRYPOINT as an engine would apply them.
4. As the image's numeric USER, inside the tree with chroot: every shipped
   ELF file resolves all its libraries (ldd), the entrypoint's program says
   `version`, and the entrypoint consumes events from a nats-server on the
   host's loopback with the audit plugin and the image's default recorder;
   every event published must be audited exactly once.

--without PACKAGE is the self-test: the same run with one runtime package
left out must fail the library check (exit 0 when it does, 1 when the
check passes anyway), proving that the check notices a missing package.

MIRROR arguments for mmdebstrap can be given in IB_ROOTFS_MIRROR
(space-separated, e.g. the path of a deb822 sources file); without them
mmdebstrap uses Debian's default mirrors. Needs root (chroot), mmdebstrap
and nats-server; exits 77 (skipped) when one is missing. Exit 1 on any
failed check, with the reason on stderr.
"""

import argparse
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
# Debian major versions of a pinned debian:<version>[-slim] base, by suite.
SUITES = {"12": "bookworm", "13": "trixie"}
AUDIT_PLUGIN = "/plugins/audit.so"
# Docker's PATH for a container whose image sets none.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
IGNORED = ("VOLUME", "EXPOSE", "LABEL", "ARG", "HEALTHCHECK", "STOPSIGNAL", "CMD", "SHELL")


class CheckFailed(Exception):
    """A check of the runtime stage failed; the message says which and why."""


def log(msg):
    print(f"runtime_rootfs: {msg}", flush=True)


def instructions(path):
    """The Dockerfile as (line, KEYWORD, rest) triples: comments dropped,
    backslash continuations joined, keywords upper-cased."""
    out, buf, start = [], "", 0
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not buf and (not line or line.startswith("#")):
                continue
            if buf and line.startswith("#"):
                continue  # a comment inside a continued instruction
            if not buf:
                start = n
            if line.endswith("\\"):
                buf += line[:-1] + " "
                continue
            buf += line
            keyword, _, rest = buf.partition(" ")
            out.append((start, keyword.upper(), rest.strip()))
            buf = ""
    return out


def stages(path):
    """The stages of the Dockerfile: a list of dicts with the base image,
    the alias (lower case, or None) and the stage's instructions."""
    result = []
    for lineno, keyword, rest in instructions(path):
        if keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            alias = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append({"image": words[0], "alias": alias, "body": []})
        elif result:
            result[-1]["body"].append((lineno, keyword, rest))
    if len(result) < 2:
        raise CheckFailed(f"dockerfile: {path}: expected a build stage and a runtime stage")
    return result


def shell_commands(run_text):
    """The commands of a RUN line's `&&` chain, each as a string."""
    return [c.strip() for c in run_text.split("&&") if c.strip()]


def apt_packages(stage):
    """Every package the stage's RUN lines `apt-get install`, sorted."""
    pkgs = set()
    for _, keyword, rest in stage["body"]:
        if keyword != "RUN":
            continue
        for cmd in shell_commands(rest):
            words = shlex.split(cmd)
            if words[:1] == ["apt-get"] and "install" in words:
                after = words[words.index("install") + 1 :]
                pkgs.update(w for w in after if not w.startswith("-"))
    if not pkgs:
        raise CheckFailed("the runtime stage installs no packages with apt-get install")
    return sorted(pkgs)


def suite_of(image):
    """The Debian suite of a debian:<major>[.<minor>][-slim] base image."""
    m = re.fullmatch(r"(?:docker\.io/)?(?:library/)?debian:(\d+)[^@]*(?:@.*)?", image)
    if not m or m.group(1) not in SUITES:
        raise CheckFailed(f"runtime base {image}: not a Debian release this check knows")
    return SUITES[m.group(1)]


def install_layout(build_stage):
    """(DESTDIR, prefix) that the build stage's `cmake --install` used."""
    text = " ".join(rest for _, kw, rest in build_stage["body"] if kw == "RUN")
    destdir = re.search(r"DESTDIR=(\S+)\s+cmake\s+--install", text)
    prefix = re.search(r"-DCMAKE_INSTALL_PREFIX=(\S+)", text)
    if not destdir or not prefix:
        raise CheckFailed("the build stage has no DESTDIR=... cmake --install with a prefix")
    return destdir.group(1).rstrip("/"), prefix.group(1)


def rootfs_tarball(cache, suite, packages):
    """A cached mmdebstrap tarball of SUITE with PACKAGES; built if missing.
    Returns its path and whether it came from the cache."""
    mirrors = shlex.split(os.environ.get("IB_ROOTFS_MIRROR", ""))
    key = hashlib.sha256(" ".join(["minbase", suite, *packages, "|", *mirrors]).encode())
    path = os.path.join(cache, f"rootfs-{suite}-{key.hexdigest()[:16]}.tar")
    if os.path.exists(path):
        return path, True
    os.makedirs(cache, exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial.tar"
    cmd = ["mmdebstrap", "--variant=minbase", "--include=" + ",".join(packages), suite, partial]
    log("building the root file system: " + " ".join(cmd + mirrors))
    try:
        subprocess.run(cmd + mirrors, check=True, stdin=subprocess.DEVNULL)
    except subprocess.CalledProcessError as e:
        if os.path.exists(partial):
            os.unlink(partial)
        raise CheckFailed(f"mmdebstrap failed with status {e.returncode}") from e
    os.replace(partial, path)  # atomic: a concurrent run sees all or nothing
    return path, False


class Image:
    """The runtime stage being replayed on an extracted root file system:
    the state an engine keeps between instructions (environment, user,
    working directory, entrypoint) and the files COPY put in."""

    def __init__(self, root):
        self.root = root
        self.env = {"PATH": DEFAULT_PATH}
        self.user = (0, 0)
        self.workdir = "/"
        self.entrypoint = None
        self.copied = []  # paths inside the image

    def host_path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def command(self, argv, user=None):
        """The host command that runs ARGV inside the tree as USER (default
        the image's USER) in the working directory, as `docker run` would."""
        uid, gid = self.user if user is None else user
        chdir = 'cd "$0" && exec "$@"'
        return ["chroot", f"--userspec={uid}:{gid}", self.root, "/bin/sh", "-c", chdir,
                self.workdir, *argv]

    def environ(self, **overrides):
        """The image's environment, with HOME from its passwd like an engine."""
        env = {"HOME": self.home(self.user[0]), **self.env, **overrides}
        return env

    def home(self, uid):
        with open(self.host_path("/etc/passwd"), encoding="utf-8") as f:
            for line in f:
                fields = line.rstrip("\n").split(":")
                if len(fields) >= 6 and fields[2] == str(uid):
                    return fields[5]
        return "/"

    def output(self, argv, what):
        """Runs ARGV inside as the image's user; its stdout, or CheckFailed."""
        r = subprocess.run(self.command(argv), env=self.environ(), capture_output=True, text=True)
        if r.returncode != 0:
            raise CheckFailed(f"{what}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r.stdout


def parse_env(rest):
    """ENV K=V K2="V 2" ... or the legacy ENV K V form, as a dict."""
    words = shlex.split(rest)
    if words and "=" not in words[0]:
        return {words[0]: rest.split(None, 1)[1] if len(words) > 1 else ""}
    return dict(w.split("=", 1) for w in words)


def parse_user(rest):
    """USER uid[:gid], numeric (the Dockerfile rules require it)."""
    m = re.fullmatch(r"(\d+)(?::(\d+))?", rest.strip())
    if not m:
        raise CheckFailed(f"USER {rest}: this check replays numeric users only")
    return int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))


def copy_in(image, lineno, rest, sources):
    """COPY --from=STAGE SRC... DEST, SOURCES mapping a stage alias to
    (its install root, the host directory holding that tree). Files keep
    their modes, belong to root (or --chown) and follow symlinks, as COPY."""
    words = shlex.split(rest)
    flags = dict(w[2:].split("=", 1) for w in words if w.startswith("--"))
    paths = [w for w in words if not w.startswith("--")]
    if set(flags) - {"from", "chown"} or flags.get("from", "").lower() not in sources:
        raise CheckFailed(f"line {lineno}: COPY {rest}: only COPY --from=<build stage> is replayed")
    out_root, out_local = sources[flags["from"].lower()]
    owner = parse_user(flags["chown"]) if "chown" in flags else (0, 0)
    dest = paths[-1]
    for src in paths[:-1]:
        if not src.startswith(out_root + "/"):
            raise CheckFailed(f"line {lineno}: {src} is outside the build stage's {out_root}")
        local = out_local + src[len(out_root) :]
        if not os.path.exists(local):
            raise CheckFailed(f"line {lineno}: {src}: the install has no {local}")
        if os.path.isdir(local):
            targets = [(os.path.join(local, n), os.path.join(dest, n)) for n in os.listdir(local)]
        else:
            name = os.path.basename(src)
            targets = [(local, os.path.join(dest, name) if dest.endswith("/") else dest)]
        for frm, to in targets:
            copy_one(image, frm, to, owner)


def copy_one(image, frm, to, owner):
    host = image.host_path(to)
    os.makedirs(os.path.dirname(host), mode=0o755, exist_ok=True)
    if os.path.isdir(frm):
        shutil.copytree(frm, host, symlinks=True, dirs_exist_ok=True)
    else:
        shutil.copy2(frm, host)
    for dirpath, _, files in os.walk(host):
        os.chown(dirpath, *owner)
        for f in files:
            os.lchown(os.path.join(dirpath, f), *owner)
            image.copied.append(os.path.join(to, os.path.relpath(os.path.join(dirpath, f), host)))
    if not os.path.isdir(host):
        os.chown(host, *owner)
        image.copied.append(to)


def replay(image, stage, sources):
    """Applies the runtime stage's instructions to IMAGE in order."""
    for lineno, keyword, rest in stage["body"]:
        if keyword == "RUN":
            cmds = [c for c in shell_commands(rest) if not c.startswith("apt-get ")]
            if cmds:
                argv = image.command(["/bin/sh", "-c", " && ".join(cmds)], user=image.user)
                if subprocess.run(argv, env=image.environ()).returncode != 0:
                    raise CheckFailed(f"line {lineno}: RUN {' && '.join(cmds)}: failed")
        elif keyword == "COPY":
            copy_in(image, lineno, rest, sources)
        elif keyword == "ENV":
            image.env.update(parse_env(rest))
        elif keyword == "WORKDIR":
            image.workdir = os.path.join(image.workdir, rest)
            os.makedirs(image.host_path(image.workdir), exist_ok=True)
        elif keyword == "USER":
            image.user = parse_user(rest)
        elif keyword == "ENTRYPOINT":
            image.entrypoint = json.loads(rest)
        elif keyword not in IGNORED:
            raise CheckFailed(f"line {lineno}: {keyword} is not replayed by this check")
    if not image.entrypoint:
        raise CheckFailed("the runtime stage has no exec-form ENTRYPOINT")


def check_user(image):
    """The chroot really runs as the image's numeric user, no other groups."""
    uid, gid = image.user
    ids = image.output(["/bin/sh", "-c", "id -u; id -g; id -G"], "id").split()
    if ids != [str(uid), str(gid), str(gid)]:
        raise CheckFailed(f"expected uid {uid}, gid {gid} and no other group; got {ids}")
    log(f"runs as uid {uid}, gid {gid}")


def check_libraries(image):
    """Every ELF file COPY brought in resolves all its libraries in the image."""
    elves = []
    for path in image.copied:
        with open(image.host_path(path), "rb") as f:
            if f.read(4) == b"\x7fELF":
                elves.append(path)
    if not elves:
        raise CheckFailed("COPY brought no ELF file into the image")
    for path in elves:
        out = image.output(["ldd", path], f"libraries: ldd {path}")
        missing = [line.strip() for line in out.splitlines() if "not found" in line]
        if missing:
            raise CheckFailed(f"libraries: ldd {path}: unresolved: {missing}")
    log(f"ldd resolves every library of {len(elves)} files: {' '.join(elves)}")


def check_version(image):
    out = image.output([image.entrypoint[0], "version"], f"{image.entrypoint[0]} version")
    if not out.startswith("ibus "):
        raise CheckFailed(f"unexpected version output: {out!r}")
    log("version: " + out.replace("\n", "; ").rstrip("; "))


def start_nats(work):
    """A JetStream nats-server on a free loopback port of the host: (Popen, URL)."""
    ports_dir = os.path.join(work, "ports")
    os.makedirs(ports_dir)
    cmd = ["nats-server", "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", os.path.join(work, "js"),
           "--ports_file_dir", ports_dir]
    with open(os.path.join(work, "nats.log"), "wb") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        files = os.listdir(ports_dir)
        if files:
            with open(os.path.join(ports_dir, files[0]), encoding="utf-8") as f:
                return proc, json.load(f)["nats"][0]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    raise CheckFailed("nats-server did not start; see " + os.path.join(work, "nats.log"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, port, logfile):
    """Waits for /readyz 200: the image's ibus is connected and bound."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"ibus run exited {proc.returncode} before ready:\n{read(logfile)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise CheckFailed(f"ibus run never became ready:\n{read(logfile)}")


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def audited(image, audit_log):
    """How many times the audit plugin saw each event id."""
    counts = {}
    for line in read(image.host_path(audit_log)).splitlines():
        fields = line.split()
        if len(fields) >= 2:
            counts[fields[1]] = counts.get(fields[1], 0) + 1
    return counts


def publish(host_ibus, url, count, ids_file):
    """Publishes COUNT events and about 20% duplicates of them from the host
    with the build's own ibus; returns the set of unique ids."""
    cmd = [host_ibus, "publish", "--nats-url", url, "--prefix", "rootfs", "--type",
           "order.created", "--count", str(count), "--duplicates", "0.2", "--seed", "11",
           "--ids-file", ids_file]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    stats = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
    ids = set(read(ids_file).split())
    if int(stats.get("failed", "1")) != 0 or int(stats.get("duplicates", "0")) == 0:
        raise CheckFailed(f"publish: expected duplicates and no failure: {out.strip()}")
    log(f"published {stats['published']} messages: {len(ids)} events, "
        f"{stats['duplicates']} duplicates")
    return ids


def stop(proc, grace):
    """SIGTERM, then SIGKILL after GRACE seconds; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def check_consume(image, host_ibus, work, count):
    """The entrypoint consumes from a nats-server on the host with the audit
    plugin and the image's default recorder; each event is audited once and
    a SIGTERM drains it with status 0."""
    nats, url = start_nats(work)
    port = free_port()
    audit_log = os.path.join(image.workdir, "audit.log")
    argv = image.entrypoint + ["--nats-url", url, "--create", "--stream", "ROOTFS",
                               "--stream-subjects", "rootfs.>", "--durable", "rootfs",
                               "--plugin", AUDIT_PLUGIN, "--plugin-config",
                               f"audit=file={audit_log}"]
    logfile = os.path.join(work, "ibus.log")
    env = image.environ(IB_HTTP=f"127.0.0.1:{port}")  # the image's 0.0.0.0:9090 may be taken
    try:
        with open(logfile, "wb") as logf:
            proc = subprocess.Popen(image.command(argv), env=env, stdout=logf,
                                    stderr=subprocess.STDOUT)
        try:
            wait_ready(proc, port, logfile)
            unique = publish(host_ibus, url, count, os.path.join(work, "ids"))
            deadline = time.monotonic() + 60
            while set(audited(image, audit_log)) != unique and time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                time.sleep(0.2)
            time.sleep(0.5)  # let late duplicates arrive: they must be dropped
        finally:
            status = stop(proc, 30)
    finally:
        stop(nats, 10)
    verify_consume(image, audited(image, audit_log), unique, status, logfile)


def verify_consume(image, counts, unique, status, logfile):
    missing = unique - set(counts)
    repeated = {k: n for k, n in counts.items() if n > 1}
    stray = set(counts) - unique
    if status != 0 or missing or repeated or stray:
        raise CheckFailed(f"consume: exit {status}, {len(missing)} events missing, "
                          f"{len(repeated)} audited more than once, {len(stray)} unknown\n"
                          f"{read(logfile)}")
    recorder = image.env.get("IB_RECORDER", "")
    if recorder.startswith("sqlite:"):
        st = os.stat(image.host_path(recorder[len("sqlite:") :]))
        if (st.st_uid, st.st_gid) != image.user:
            raise CheckFailed(f"{recorder}: owned by {st.st_uid}:{st.st_gid}, not the image's user")
    log(f"consumed: {len(unique)} events audited once each, recorder {recorder or 'default'}, "
        "SIGTERM drained with status 0")


def prepare(args, work):
    """Builds or reuses the root file system, extracts it and replays the
    runtime stage with the installed build. Returns the Image."""
    all_stages = stages(args.dockerfile)
    runtime, build = all_stages[-1], all_stages[0]
    suite, packages = suite_of(runtime["image"]), apt_packages(runtime)
    if args.without:
        if args.without not in packages:
            raise CheckFailed(f"--without {args.without}: not a runtime package")
        packages.remove(args.without)
    log(f"runtime stage: {runtime['image']} ({suite}), packages: {' '.join(packages)}")
    out_root, prefix = install_layout(build)
    out_local = os.path.join(work, "out")
    subprocess.run(["cmake", "--install", args.build, "--prefix", prefix], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, "DESTDIR": out_local})
    started = time.monotonic()
    tarball, cached = rootfs_tarball(args.cache, suite, packages)
    log(f"root file system {'from the cache' if cached else 'built'} in "
        f"{time.monotonic() - started:.1f}s: {tarball}")
    image = Image(os.path.join(work, "root"))
    os.makedirs(image.root)
    subprocess.run(["tar", "-xpf", tarball, "--numeric-owner", "-C", image.root], check=True)
    sources = {build["alias"]: (out_root, out_local)} if build["alias"] else {}
    replay(image, runtime, sources)
    return image


@contextlib.contextmanager
def proc_mounted(image):
    """A fresh /proc inside the tree while the checks run, as every engine
    provides: glibc resolves the $ORIGIN of ibus's RUNPATH through
    /proc/self/exe, so without it the program cannot find its library."""
    target = image.host_path("/proc")
    subprocess.run(["mount", "-t", "proc", "proc", target], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", target], check=False)


def remove_work(work, image):
    """Deletes the work directory, never through a /proc still mounted."""
    if image is not None and os.path.ismount(image.host_path("/proc")):
        log(f"kept {work}: its /proc is still mounted")
        return
    shutil.rmtree(work, ignore_errors=True)


def missing_tools():
    if os.geteuid() != 0:
        return "not root (chroot needs it)"
    for tool in ("mmdebstrap", "nats-server", "chroot", "cmake", "tar", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is missing (Debian: apt-get install {tool})"
    return None


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, help="a build tree with ibus and the plugins")
    p.add_argument("--dockerfile", default=os.path.join(here, "..", "..", "deploy", "Dockerfile"))
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "ibus-rootfs-cache"))
    p.add_argument("--events", type=int, default=200)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--without", metavar="PACKAGE", help="self-test: leave PACKAGE out")
    args = p.parse_args()
    why = missing_tools()
    if why:
        log(f"skipped: {why}")
        return SKIP
    started = time.monotonic()
    work = tempfile.mkdtemp(prefix="ibus-rootfs.")
    image = None
    try:
        image = prepare(args, work)
        with proc_mounted(image):
            check_user(image)
            check_libraries(image)
            check_version(image)
            host_ibus = os.path.join(args.build, "plugin", "cli", "ibus")
            check_consume(image, host_ibus, work, args.events)
    except (CheckFailed, subprocess.CalledProcessError) as e:
        if args.without and str(e).startswith("libraries: "):
            log(f"without {args.without} the check fails, as it must: {e}")
            return 0
        print(f"runtime_rootfs: FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            remove_work(work, image)
    if args.without:
        print(f"runtime_rootfs: FAIL: the checks pass without {args.without}", file=sys.stderr)
        return 1
    log(f"ok in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
