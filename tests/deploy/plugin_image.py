#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The build stage of deploy/Dockerfile.plugin, replayed without a container
engine, and its result loaded by the ibus of this build.

The stage starts FROM the build stage of deploy/Dockerfile, whose image
holds this build installed with DESTDIR and a prefix (read from that
Dockerfile's RUN, so a change there is followed here). This test:

  1. installs this build's plugin headers the same way into <tmp>/root,
     which stands for the image's /;
  2. replays the stage's ENV, WORKDIR, COPY (from the context directory)
     and RUN in order, every absolute path of ENV, WORKDIR and COPY under
     <tmp>/root, each RUN with /bin/sh -c in the WORKDIR; any other
     instruction fails the test, so the replay never silently skips one;
  3. takes the file the final stage copies --from the build stage (it must
     exist, mode 0644) into a plugin directory, and runs `ibus run --check`
     with the final stage's ENV (the image's /data under <tmp>/root):
     exit 0, the handler listed, and the plugin's fini line on stderr;
  4. the same with a bad plugin configuration: exit 2 and init's message.

usage: plugin_image.py --source DIR --build DIR --ibus EXE
       [--dockerfile F] [--context DIR]
"""

import argparse
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"plugin_image: FAIL: {msg}", flush=True)
    sys.exit(1)


def instructions(path):
    """(line, KEYWORD, rest) of each logical instruction: comments dropped,
    backslash continuations joined (as scripts/check-dockerfile.sh reads
    them)."""
    out, buf, start = [], "", 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not buf and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if not buf:
                start = n
            text = line.strip()
            if text.endswith("\\"):
                buf += text[:-1] + " "
                continue
            buf += text
            word, _, rest = buf.partition(" ")
            out.append((start, word.upper(), rest.strip()))
            buf = ""
    return out


def stages(insts):
    """[(name or None, FROM argument, [instructions])]"""
    result = []
    for inst in insts:
        if inst[1] == "FROM":
            words = inst[2].split()
            name = words[2].lower() if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append((name, words[0], []))
        elif result:
            result[-1][2].append(inst)
    return result


def env_pairs(rest):
    """ENV K=V K2=V2 (values as the shell would unquote them)."""
    pairs = {}
    for word in shlex.split(rest):
        key, eq, value = word.partition("=")
        if not eq:
            fail(f"ENV {rest}: only the K=V form is replayed")
        pairs[key] = value
    return pairs


def rebase(root, value):
    """Every absolute path of a colon-separated value, under root."""
    return ":".join(root + p if p.startswith("/") else p for p in value.split(":"))


def main_install(source):
    """DESTDIR and prefix of deploy/Dockerfile's install, from its RUN."""
    text = open(os.path.join(source, "deploy", "Dockerfile")).read()
    destdir = re.search(r"DESTDIR=(\S+) cmake --install", text)
    prefix = re.search(r"-DCMAKE_INSTALL_PREFIX=(\S+)", text)
    if not destdir or not prefix:
        fail("deploy/Dockerfile: no 'DESTDIR=... cmake --install' or CMAKE_INSTALL_PREFIX")
    return destdir.group(1), prefix.group(1)


def replay(stage, root, context, env):
    workdir = root
    for line, word, rest in stage:
        if word == "ENV":
            for key, value in env_pairs(rest).items():
                env[key] = rebase(root, value)
        elif word == "WORKDIR":
            workdir = root + rest if rest.startswith("/") else os.path.join(workdir, rest)
            os.makedirs(workdir, exist_ok=True)
        elif word == "COPY":
            words = rest.split()
            if any(w.startswith("--") for w in words):
                fail(f"line {line}: COPY {rest}: the build stage copies from the context only")
            *sources, dest = words
            dest = root + dest if dest.startswith("/") else os.path.join(workdir, dest)
            for s in sources:
                shutil.copy(os.path.join(context, s), dest)
        elif word == "RUN":
            print(f"plugin_image: RUN (line {line}) in {workdir}", flush=True)
            r = subprocess.run(["/bin/sh", "-c", rest], cwd=workdir, env=env)
            if r.returncode != 0:
                fail(f"line {line}: RUN exited {r.returncode}")
        else:
            fail(f"line {line}: {word} is not replayed; extend this test")


def final_copy(stage, build_name):
    """(source, dest, chmod) of the final stage's COPY --from=<build stage>."""
    for line, word, rest in stage:
        if word != "COPY" or f"--from={build_name}" not in rest.split():
            continue
        chmod = next((w.split("=", 1)[1] for w in rest.split() if w.startswith("--chmod=")), None)
        words = [w for w in rest.split() if not w.startswith("--")]
        if len(words) != 2:
            fail(f"line {line}: COPY {rest}: expected one source and one destination")
        return words[0], words[1], chmod
    fail(f"the final stage copies nothing from the {build_name} stage")


def check_run(ibus, env, expect_code, expect_text):
    r = subprocess.run([ibus, "run", "--check"], env=env, capture_output=True, text=True,
                       timeout=60)
    out = r.stdout + r.stderr
    if r.returncode != expect_code or expect_text not in out:
        fail(f"ibus run --check: exit {r.returncode} (expected {expect_code}), "
             f"expected {expect_text!r} in:\n{out}")
    return out


def run(args, tmp):
    root = os.path.join(tmp, "root")
    all_stages = stages(instructions(args.dockerfile))
    if len(all_stages) < 2:
        fail(f"{args.dockerfile}: expected a build stage and a final stage")
    (build_name, build_from, build), (_, final_from, final) = all_stages[0], all_stages[-1]
    if build_name is None:
        fail("the first stage has no name (FROM ... AS build)")
    if build_from.rsplit(":", 1)[-1] != final_from.rsplit(":", 1)[-1]:
        fail(f"FROM {build_from} and FROM {final_from}: the two tags differ")

    destdir, prefix = main_install(args.source)
    env = dict(os.environ, DESTDIR=root + destdir)
    r = subprocess.run(["cmake", "--install", args.build, "--prefix", prefix, "--component",
                        "plugin-dev"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"cmake --install --component plugin-dev:\n{r.stdout}{r.stderr}")

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    replay(build, root, args.context, env)

    source, dest, chmod = final_copy(final, build_name)
    built = root + source
    if not os.path.isfile(built):
        fail(f"the build stage produced no {source}")
    if chmod != "0644":
        fail(f"COPY --from={build_name} {source}: --chmod={chmod}, expected 0644")
    plugins = os.path.join(tmp, "plugins")
    os.makedirs(plugins, mode=0o755)
    shutil.copy(built, os.path.join(plugins, os.path.basename(dest)))
    os.chmod(os.path.join(plugins, os.path.basename(dest)), stat.S_IRUSR | stat.S_IWUSR
             | stat.S_IRGRP | stat.S_IROTH)
    os.makedirs(os.path.join(root, "data"), mode=0o700)

    image_env = {}
    for line, word, rest in final:
        if word == "ENV":
            image_env.update(env_pairs(rest))
    if "IB_PLUGIN" not in image_env:
        fail("the final stage sets no IB_PLUGIN")
    run_env = {k: v.replace("/data/", root + "/data/") for k, v in image_env.items()}
    run_env.update(PATH=os.environ.get("PATH", "/usr/bin:/bin"), IB_PLUGIN_DIR=plugins,
                   IB_RECORDER=f"sqlite:{root}/data/processed.db", IB_LOG_FORMAT="text")
    name = image_env["IB_PLUGIN"]
    out = check_run(args.ibus, run_env, 0, "fini: 0 charge request(s) sent to")
    if f"/{name}/" not in out or "order.created" not in out:
        fail(f"ibus run --check does not list the {name} handler on order.created:\n{out}")
    print(f"plugin_image: {dest} built by the build stage loads:\n{out}", flush=True)

    config_var = f"IB_PLUGIN_CONFIG_{name.upper()}"
    run_env[config_var] = "endpoint=ftp://payments.example,file=" + root + "/data/x.log"
    check_run(args.ibus, run_env, 2, "endpoint=ftp://payments.example: not an http:// or "
              "https:// URL")
    print("plugin_image: a bad configuration fails init with its message: ok", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--ibus", required=True)
    ap.add_argument("--dockerfile")
    ap.add_argument("--context")
    args = ap.parse_args()
    args.dockerfile = args.dockerfile or os.path.join(args.source, "deploy", "Dockerfile.plugin")
    args.context = args.context or os.path.join(args.source, "plugin", "examples")
    args.ibus = os.path.abspath(args.ibus)
    for tool in ("cc", "pkg-config", "nm", "cmake"):
        if shutil.which(tool) is None:
            print(f"plugin_image: SKIP: no {tool}", flush=True)
            return 77
    tmp = tempfile.mkdtemp(prefix="ib-plugin-image-")
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("plugin_image: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
