#!/usr/bin/env python3
# A stand-in for the GitHub CLI's `gh release` commands, for the workflow replay harness
# (tests/support/replay/). Releases live in STATE/releases/<tag>/release.json + assets/.
#
# Stricter than nothing, as strict as GitHub where it matters:
# - no GH_TOKEN (or GITHUB_TOKEN, which gh also reads) -> refused, as gh does;
# - the token the harness hands a job encodes its `permissions:` (replay.contents=write...):
#   reading needs contents read or write, changing anything needs contents: write;
# - GH_REPO (or -R/--repo) must name the run's repository;
# - immutable releases: a published release cannot be edited, uploaded to or have assets
#   deleted, and a tag once published can never be used again;
# - STATE/fail-once holding e.g. `release edit` makes the next matching call fail once.
#
# The harness writes this file with STATE and REPOSITORY filled in.
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time

STATE = "@STATE@"
REPOSITORY = "@REPOSITORY@"
RELEASES = os.path.join(STATE, "releases")
PUBLISHED_TAGS = os.path.join(STATE, "published-tags")


def fail(message, code=1):
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.exit(code)


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def token_permissions():
    token = os.environ.get("GH_TOKEN") or os.environ.get("GITHUB_TOKEN")
    if not token:
        fail("gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable. Example:\n"
             "  env:\n    GH_TOKEN: ${{ github.token }}", 4)
    if not token.startswith("replay"):
        fail("HTTP 401: Bad credentials (https://api.github.com/graphql)")
    perms = {}
    for part in token.split(".")[1:]:
        if "=" in part:
            scope, level = part.split("=", 1)
            perms[scope] = level
    return perms


def need(perms, level):
    have = perms.get("contents", "none")
    if level == "write" and have != "write" or level == "read" and have not in ("read", "write"):
        fail("HTTP 403: Resource not accessible by integration (the job's token has contents: %s; "
             "this needs contents: %s in the job's permissions)" % (have, level))


def check_repo(repo_flag):
    repo = repo_flag or os.environ.get("GH_REPO")
    if repo:
        if repo != REPOSITORY:
            fail("HTTP 404: Not Found (repository %s; this run's repository is %s)" % (repo, REPOSITORY))
        return
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True)
    if inside.returncode != 0:
        fail("failed to run git: fatal: not a git repository (or any of the parent directories): .git")


def maybe_fail_once(words):
    path = os.path.join(STATE, "fail-once")
    try:
        with open(path) as f:
            target = f.read().split()
    except FileNotFoundError:
        return
    if target and words[: len(target)] == target:
        os.remove(path)
        fail("HTTP 502: Bad Gateway (injected once by %s for `gh %s`)" % (path, " ".join(target)))


def release_dir(tag):
    return os.path.join(RELEASES, tag)


def load(tag):
    try:
        with open(os.path.join(release_dir(tag), "release.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save(rel):
    d = release_dir(rel["tagName"])
    os.makedirs(os.path.join(d, "assets"), exist_ok=True)
    tmp = os.path.join(d, "release.json.tmp")
    with open(tmp, "w") as f:
        json.dump(rel, f, indent=2)
    os.replace(tmp, os.path.join(d, "release.json"))


def all_releases():
    if not os.path.isdir(RELEASES):
        return []
    out = [load(t) for t in os.listdir(RELEASES)]
    out = [r for r in out if r]
    out.sort(key=lambda r: (r["createdAt"], r["seq"]), reverse=True)
    return out


def published_tags():
    try:
        with open(PUBLISHED_TAGS) as f:
            return set(f.read().split())
    except FileNotFoundError:
        return set()


def must_get(tag):
    rel = load(tag)
    if rel is None:
        fail("release not found")
    return rel


def refuse_if_published(rel, what):
    if not rel["isDraft"]:
        fail("HTTP 422: Cannot %s: release %s is published and immutable (Validation Failed)" % (what, rel["tagName"]))


def assets(rel):
    d = os.path.join(release_dir(rel["tagName"]), "assets")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def parse(args, flags, bools):
    """Splits args into positionals and options. flags take a value; bools may be --x or --x=v."""
    pos, opts = [], {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            pos.extend(args[i + 1:])
            break
        if a.startswith("-") and a != "-":
            name, eq, val = a.partition("=")
            if name in bools:
                opts[bools[name]] = (val if eq else "true")
            elif name in flags:
                if not eq:
                    i += 1
                    if i >= len(args):
                        fail("flag needs an argument: %s" % name)
                    val = args[i]
                key = flags[name]
                if key in ("pattern",):
                    opts.setdefault(key, []).append(val)
                else:
                    opts[key] = val
            else:
                fail("unknown flag: %s" % name)
        else:
            pos.append(a)
        i += 1
    return pos, opts


REPO = {"-R": "repo", "--repo": "repo"}


def view_json(rel, fields):
    full = {
        "tagName": rel["tagName"], "name": rel["title"], "isDraft": rel["isDraft"],
        "isLatest": rel.get("isLatest", False), "isPrerelease": False, "createdAt": rel["createdAt"],
        "publishedAt": rel.get("publishedAt"), "targetCommitish": rel["target"], "body": rel["notes"],
        "assets": [{"name": a} for a in assets(rel)],
    }
    out = {}
    for f in fields.split(","):
        if f not in full:
            fail("Unknown JSON field: %r\nAvailable fields:\n  %s" % (f, "\n  ".join(sorted(full))))
        out[f] = full[f]
    return out


def cmd_view(args):
    pos, opts = parse(args, dict(REPO, **{"--json": "json", "-q": "jq", "--jq": "jq"}), {})
    check_repo(opts.get("repo"))
    need(token_permissions(), "read")
    if len(pos) > 1:
        fail("accepts at most 1 arg(s), received %d" % len(pos))
    if pos:
        rel = must_get(pos[0])
    else:
        rel = latest() or fail("release not found")
    if "json" in opts:
        print(json.dumps(view_json(rel, opts["json"]), indent=2))
    else:
        print("title:\t%s\ntag:\t%s\ndraft:\t%s\n--\n%s" % (rel["title"], rel["tagName"], str(rel["isDraft"]).lower(), rel["notes"]))


def latest():
    for r in all_releases():
        if r.get("isLatest"):
            return r
    return None


def cmd_create(args):
    pos, opts = parse(args, dict(REPO, **{"--target": "target", "-t": "title", "--title": "title",
                                          "-F": "notes_file", "--notes-file": "notes_file", "-n": "notes", "--notes": "notes"}),
                      {"-d": "draft", "--draft": "draft", "--latest": "latest", "--generate-notes": "generate", "-p": "prerelease", "--prerelease": "prerelease"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "write")
    if not pos:
        fail("could not create: no tag name provided")
    tag, files = pos[0], pos[1:]
    if tag in published_tags():
        fail("HTTP 422: Validation Failed: tag_name %s was used by a published release and cannot be reused (immutable releases)" % tag)
    if load(tag) is not None:
        fail("HTTP 422: Validation Failed: a release with tag %s already exists" % tag)
    notes = opts.get("notes", "")
    if "notes_file" in opts:
        with open(opts["notes_file"]) as f:
            notes = f.read()
    seq = len(os.listdir(RELEASES)) if os.path.isdir(RELEASES) else 0
    rel = {"tagName": tag, "title": opts.get("title", tag), "notes": notes, "target": opts.get("target", "main"),
           "isDraft": opts.get("draft", "false") == "true", "isLatest": False, "createdAt": now(), "publishedAt": None, "seq": seq}
    save(rel)
    for f in files:
        put_asset(rel, f, clobber=False)
    if not rel["isDraft"]:
        publish(rel, opts.get("latest", "true") != "false")
    print("https://github.com/%s/releases/tag/%s" % (REPOSITORY, tag))


def publish(rel, make_latest):
    rel["isDraft"] = False
    rel["publishedAt"] = now()
    if make_latest:
        for other in all_releases():
            if other.get("isLatest") and other["tagName"] != rel["tagName"]:
                other["isLatest"] = False
                save(other)
        rel["isLatest"] = True
    save(rel)
    with open(PUBLISHED_TAGS, "a") as f:
        f.write(rel["tagName"] + "\n")


def put_asset(rel, path, clobber):
    path = path.split("#", 1)[0]
    if not os.path.isfile(path):
        fail("open %s: no such file or directory" % path)
    dest = os.path.join(release_dir(rel["tagName"]), "assets", os.path.basename(path))
    if os.path.exists(dest) and not clobber:
        fail("asset under the same name already exists: [%s]" % os.path.basename(path))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copyfile(path, dest)


def cmd_upload(args):
    pos, opts = parse(args, dict(REPO), {"--clobber": "clobber"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "write")
    if len(pos) < 2:
        fail("requires at least 2 arg(s), only received %d" % len(pos))
    rel = must_get(pos[0])
    refuse_if_published(rel, "upload assets")
    for f in pos[1:]:
        put_asset(rel, f, opts.get("clobber") == "true")


def cmd_edit(args):
    pos, opts = parse(args, dict(REPO, **{"-F": "notes_file", "--notes-file": "notes_file", "-n": "notes", "--notes": "notes",
                                          "-t": "title", "--title": "title", "--target": "target", "--tag": "tag"}),
                      {"--draft": "draft", "--latest": "latest", "--prerelease": "prerelease"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "write")
    if len(pos) != 1:
        fail("accepts 1 arg(s), received %d" % len(pos))
    rel = must_get(pos[0])
    refuse_if_published(rel, "edit")
    if "notes_file" in opts:
        with open(opts["notes_file"]) as f:
            rel["notes"] = f.read()
    if "notes" in opts:
        rel["notes"] = opts["notes"]
    if "title" in opts:
        rel["title"] = opts["title"]
    if "target" in opts:
        rel["target"] = opts["target"]
    if opts.get("draft") == "false":
        if rel["tagName"] in published_tags():
            fail("HTTP 422: Validation Failed: tag_name %s was used by a published release and cannot be reused (immutable releases)" % rel["tagName"])
        publish(rel, opts.get("latest", "true") != "false")
    else:
        save(rel)
    print("https://github.com/%s/releases/tag/%s" % (REPOSITORY, rel["tagName"]))


def cmd_download(args):
    pos, opts = parse(args, dict(REPO, **{"-p": "pattern", "--pattern": "pattern", "-D": "dir", "--dir": "dir",
                                          "-A": "archive", "--archive": "archive", "-O": "output", "--output": "output"}),
                      {"--clobber": "clobber", "--skip-existing": "skip"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "read")
    if len(pos) > 1:
        fail("accepts at most 1 arg(s), received %d" % len(pos))
    rel = must_get(pos[0]) if pos else (latest() or fail("release not found"))
    patterns = opts.get("pattern", ["*"])
    names = [a for a in assets(rel) if any(fnmatch.fnmatchcase(a, p) for p in patterns)]
    if not names:
        fail("no assets match the file pattern")
    d = opts.get("dir", ".")
    os.makedirs(d, exist_ok=True)
    for name in names:
        dest = os.path.join(d, name)
        if os.path.exists(dest):
            if opts.get("skip") == "true":
                continue
            if opts.get("clobber") != "true":
                fail("%s already exists (use `--clobber` to overwrite file or `--skip-existing` to skip file)" % dest)
        shutil.copyfile(os.path.join(release_dir(rel["tagName"]), "assets", name), dest)


def cmd_list(args):
    pos, opts = parse(args, dict(REPO, **{"--json": "json", "-L": "limit", "--limit": "limit", "-q": "jq", "--jq": "jq", "-O": "order", "--order": "order"}),
                      {"--exclude-drafts": "exclude_drafts", "--exclude-pre-releases": "exclude_pre"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "read")
    if pos:
        fail("unknown arguments %r" % pos)
    rels = all_releases()
    if opts.get("exclude_drafts") == "true":
        rels = [r for r in rels if not r["isDraft"]]
    rels = rels[: int(opts.get("limit", "30"))]
    if "json" in opts:
        allowed = {"createdAt", "isDraft", "isLatest", "isPrerelease", "name", "publishedAt", "tagName"}
        fields = opts["json"].split(",")
        for f in fields:
            if f not in allowed:
                fail("Unknown JSON field: %r\nAvailable fields:\n  %s" % (f, "\n  ".join(sorted(allowed))))
        print(json.dumps([{f: view_json(r, f)[f] for f in fields} for r in rels], indent=2))
    else:
        for r in rels:
            kind = "Draft" if r["isDraft"] else ("Latest" if r.get("isLatest") else "")
            print("%s\t%s\t%s\t%s" % (r["title"], kind, r["tagName"], r.get("publishedAt") or r["createdAt"]))


def cmd_delete_asset(args):
    pos, opts = parse(args, dict(REPO), {"-y": "yes", "--yes": "yes"})
    check_repo(opts.get("repo"))
    need(token_permissions(), "write")
    if len(pos) != 2:
        fail("accepts 2 arg(s), received %d" % len(pos))
    rel = must_get(pos[0])
    refuse_if_published(rel, "delete assets")
    path = os.path.join(release_dir(rel["tagName"]), "assets", pos[1])
    if not os.path.exists(path):
        fail("asset %s not found in release %s" % (pos[1], pos[0]))
    os.remove(path)


COMMANDS = {"view": cmd_view, "create": cmd_create, "upload": cmd_upload, "edit": cmd_edit,
            "download": cmd_download, "list": cmd_list, "delete-asset": cmd_delete_asset}


def main(argv):
    if len(argv) < 2 or argv[0] != "release" or argv[1] not in COMMANDS:
        fail("gh stand-in (replay harness): only `gh release %s` are emulated; got `gh %s`"
             % ("|".join(sorted(COMMANDS)), " ".join(argv)))
    token_permissions()  # gh checks authentication before anything else
    maybe_fail_once(argv[:2])
    COMMANDS[argv[1]](argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
