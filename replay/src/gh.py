#!/usr/bin/env python3
# A stand-in for the GitHub CLI's `gh release`, `gh attestation verify` and `trusted-root` commands, for the
# workflow replay engine (the actions-replay crate, replay/). Releases live in
# STATE/releases/<tag>/release.json + assets/.
#
# Stricter than nothing, as strict as GitHub where it matters:
# - no GH_TOKEN (or GITHUB_TOKEN, which gh also reads) -> refused, as gh does;
# - the token the harness hands a job encodes its `permissions:` (replay.contents=write...):
#   reading needs contents read or write, changing anything needs contents: write;
# - GH_REPO (or -R/--repo) must name the run's repository or a registered other one;
# - immutable releases: a published release cannot be edited, uploaded to (GitHub's answer, see
#   refuse_immutable_asset_change) or have assets deleted, and a tag once published can never
#   be used again, even after the release is deleted;
# - another repository registered with Replay::gh_foreign_repository (--repo/-R/GH_REPO) is
#   public: any valid token reads its published releases, nothing may change it (HTTP 403);
# - `gh attestation verify` checks STATE/attestations.jsonl (the attest stand-in's records)
#   of the repository named: subject digest, predicate type, and the certificate's identity
#   as gh's policy does (see cmd_attestation_verify): --signer-workflow as a pattern over the
#   subject alternative name with any ref after `@`, --source-ref, --deny-self-hosted-runners;
#   with --bundle FILE and --custom-trusted-root FILE it reads the bundles from the file instead
#   and verifies them offline as gh does (see verify_bundle: openssl's cryptography);
# - `gh api repos/OWNER/NAME` answers STATE/repository.json (the default branch);
# - `gh attestation trusted-root` prints STATE/trusted_root.jsonl, the root the test registered
#   with its Sigstore signer (Replay::sigstore);
# - STATE/fail-once holding e.g. `release edit` makes the next matching call fail once.
#
# The harness writes this file with STATE, REPOSITORY and FOREIGN filled in.
import base64
import calendar
import fnmatch
import re
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

STATE = "@STATE@"
REPOSITORY = "@REPOSITORY@"
RELEASES = os.path.join(STATE, "releases")
PUBLISHED_TAGS = os.path.join(STATE, "published-tags")
# Other repositories the job may read (`--repo owner/name`): lower-case owner/name -> a copy of
# their state dir.
FOREIGN = json.loads(r"""@FOREIGN@""")
# True once the call reads another repository: its drafts are invisible.
FOREIGN_READ = False
# The repository the call reads.
CURRENT_REPO = REPOSITORY


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
    """The repository the call is about: this run's (None) or a registered foreign one."""
    repo = repo_flag or os.environ.get("GH_REPO")
    if repo:
        if repo.lower() == REPOSITORY.lower():
            return None
        if repo.lower() in FOREIGN:
            return repo.lower()
        fail("HTTP 404: Not Found (repository %s; this run's repository is %s)" % (repo, REPOSITORY))
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], capture_output=True, text=True)
    if inside.returncode != 0:
        fail("failed to run git: fatal: not a git repository (or any of the parent directories): .git")
    return None


def use_state(state):
    global STATE, RELEASES, PUBLISHED_TAGS
    STATE = state
    RELEASES = os.path.join(STATE, "releases")
    PUBLISHED_TAGS = os.path.join(STATE, "published-tags")


def access(repo_flag, level):
    """Checks the token may do `level` (read/write) on the repository named, and points the
    state at that repository's. Another repository is public: any token reads it (its
    published releases only: drafts are visible to writers), none may change it."""
    global FOREIGN_READ, CURRENT_REPO
    perms = token_permissions()
    foreign = check_repo(repo_flag)
    if foreign is None:
        need(perms, level)
        return
    if level == "write":
        fail("HTTP 403: Resource not accessible by integration (%s is another repository: "
             "the job's token can only read it)" % foreign)
    use_state(FOREIGN[foreign])
    FOREIGN_READ = True
    CURRENT_REPO = foreign


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
            rel = json.load(f)
    except FileNotFoundError:
        return None
    if FOREIGN_READ and rel["isDraft"]:
        return None
    return rel


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


def no_jq_without_json(opts):
    if "jq" in opts:
        fail("cannot use `--jq` without specifying `--json`")


def emit(data, opts):
    """Prints --json output, through --jq (jq -r: strings raw, as gh prints them) if given."""
    text = json.dumps(data, indent=2)
    if "jq" not in opts:
        print(text)
        return
    out = subprocess.run(["jq", "-r", opts["jq"]], input=text, capture_output=True, text=True)
    if out.returncode != 0:
        fail(out.stderr)
    sys.stdout.write(out.stdout)


def asset_json(rel, name):
    path = os.path.join(release_dir(rel["tagName"]), "assets", name)
    with open(path, "rb") as f:
        digest = "sha256:" + hashlib.sha256(f.read()).hexdigest()
    return {"name": name, "size": os.path.getsize(path), "digest": digest, "state": "uploaded",
            "contentType": "application/octet-stream",
            "url": "https://github.com/%s/releases/download/%s/%s" % (CURRENT_REPO, rel["tagName"], name)}


def view_json(rel, fields):
    full = {
        "tagName": rel["tagName"], "name": rel["title"], "isDraft": rel["isDraft"],
        "isLatest": rel.get("isLatest", False), "isPrerelease": False, "createdAt": rel["createdAt"],
        "publishedAt": rel.get("publishedAt"), "targetCommitish": rel["target"], "body": rel["notes"],
        "assets": [asset_json(rel, a) for a in assets(rel)],
    }
    out = {}
    for f in fields.split(","):
        if f not in full:
            fail("Unknown JSON field: %s\nAvailable fields:\n  %s" % (json.dumps(f), "\n  ".join(sorted(full))))
        out[f] = full[f]
    return out


def cmd_view(args):
    pos, opts = parse(args, dict(REPO, **{"--json": "json", "-q": "jq", "--jq": "jq"}), {})
    access(opts.get("repo"), "read")
    if len(pos) > 1:
        fail("accepts at most 1 arg(s), received %d" % len(pos))
    if pos:
        rel = must_get(pos[0])
    else:
        rel = latest() or fail("release not found")
    if "json" in opts:
        emit(view_json(rel, opts["json"]), opts)
    else:
        no_jq_without_json(opts)
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
    access(opts.get("repo"), "write")
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
    # As cli/cli v2.60.0 pkg/cmd/release/upload/upload.go `uploadRun` does: fetch the release,
    # refuse names it already has unless --clobber (one message naming them all, `%v` of the
    # list), then per file (pkg/cmd/release/shared/upload.go `uploadWithDelete`) DELETE the
    # existing asset of that name first when clobbering, then POST the new one.
    pos, opts = parse(args, dict(REPO), {"--clobber": "clobber"})
    access(opts.get("repo"), "write")
    if len(pos) < 2:
        fail("requires at least 2 arg(s), only received %d" % len(pos))
    rel = must_get(pos[0])
    files = [f.split("#", 1)[0] for f in pos[1:]]
    for f in files:
        if not os.path.isfile(f):
            fail("open %s: no such file or directory" % f)
    have = set(assets(rel))
    existing = [os.path.basename(f) for f in files if os.path.basename(f) in have]
    clobber = opts.get("clobber") == "true"
    if existing and not clobber:
        fail("asset under the same name already exists: [%s]" % " ".join(existing))
    for f in files:
        if not rel["isDraft"]:
            refuse_immutable_asset_change(rel, os.path.basename(f), os.path.basename(f) in have)
        put_asset(rel, f, clobber)


def refuse_immutable_asset_change(rel, name, deletes_first):
    """A published (immutable) release refuses any asset change (GitHub's documentation,
    "Immutable releases": assets cannot be added, modified or deleted once published). The
    upload's answer is GitHub's own: `422 Cannot upload assets to an immutable release.`
    (the API's JSON `message`, quoted in asdf-vm/asdf#2329, concourse/github-release-resource#151
    and libredb/libredb-studio#154), which gh prints as go-gh's HTTPError does:
    `HTTP 422: <message> (<request URL>)`. With --clobber the DELETE of the existing asset
    comes first and fails first; GitHub's wording for that DELETE is in none of those sources,
    so the stand-in says so in its message."""
    release_id = 100000 + rel.get("seq", 0)
    if deletes_first:
        fail("HTTP 422: Cannot delete assets of an immutable release. (https://api.github.com/repos/%s/releases/assets/%s; "
             "the stand-in's wording: GitHub refuses the DELETE, its message is not in the sources read)"
             % (CURRENT_REPO, name))
    fail("HTTP 422: Cannot upload assets to an immutable release. "
         "(https://uploads.github.com/repos/%s/releases/%d/assets?label=&name=%s)" % (CURRENT_REPO, release_id, name))


def cmd_delete(args):
    """`gh release delete TAG --yes` (cli/cli v2.60.0 pkg/cmd/release/delete/delete.go): fetch,
    DELETE the release; messages only on a terminal. A published immutable release may be
    deleted, its tag never reused (GitHub's documentation, "Immutable releases"): the tag
    stays in published-tags. --cleanup-tag is not emulated."""
    pos, opts = parse(args, dict(REPO), {"-y": "yes", "--yes": "yes", "--cleanup-tag": "cleanup_tag"})
    access(opts.get("repo"), "write")
    if len(pos) != 1:
        fail("accepts 1 arg(s), received %d" % len(pos))
    if opts.get("cleanup_tag") == "true":
        fail("gh stand-in (replay harness): --cleanup-tag is not emulated")
    rel = must_get(pos[0])
    shutil.rmtree(release_dir(rel["tagName"]))


def cmd_edit(args):
    pos, opts = parse(args, dict(REPO, **{"-F": "notes_file", "--notes-file": "notes_file", "-n": "notes", "--notes": "notes",
                                          "-t": "title", "--title": "title", "--target": "target", "--tag": "tag"}),
                      {"--draft": "draft", "--latest": "latest", "--prerelease": "prerelease"})
    access(opts.get("repo"), "write")
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
    access(opts.get("repo"), "read")
    if len(pos) > 1:
        fail("accepts at most 1 arg(s), received %d" % len(pos))
    rel = must_get(pos[0]) if pos else (latest() or fail("release not found"))
    if "archive" in opts:
        fail("gh stand-in (replay harness): --archive is not emulated")
    patterns = opts.get("pattern", ["*"])
    names = [a for a in assets(rel) if any(fnmatch.fnmatchcase(a, p) for p in patterns)]
    if not names:
        fail("no assets match the file pattern")
    if "output" in opts:
        if "dir" in opts:
            fail("specify only one of `--dir` or `--output`")
        if len(names) > 1:
            fail("unable to write more than one asset with `--output`, got %d assets" % len(names))
        src = os.path.join(release_dir(rel["tagName"]), "assets", names[0])
        out = opts["output"]
        if out == "-":
            with open(src, "rb") as f:
                sys.stdout.buffer.write(f.read())
            return
        if os.path.exists(out) and opts.get("clobber") != "true" and opts.get("skip") != "true":
            fail("%s already exists (use `--clobber` to overwrite file or `--skip-existing` to skip file)" % out)
        if os.path.exists(out) and opts.get("skip") == "true":
            return
        shutil.copyfile(src, out)
        return
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
    """`gh release list` as cli/cli v2.60.0 pkg/cmd/release/list/list.go (flags: -L/--limit
    default 30, --exclude-drafts, --exclude-pre-releases, -O/--order asc|desc, --json
    releaseFields) and http.go `fetchReleases` (GraphQL `releases(orderBy: CREATED_AT,
    direction)` in pages of at most 100, drafts and pre-releases dropped as requested, and the
    walk stops once `limit` releases are kept: the limit applies after the exclusions and after
    the order) do it."""
    pos, opts = parse(args, dict(REPO, **{"--json": "json", "-L": "limit", "--limit": "limit", "-q": "jq", "--jq": "jq", "-O": "order", "--order": "order"}),
                      {"--exclude-drafts": "exclude_drafts", "--exclude-pre-releases": "exclude_pre"})
    access(opts.get("repo"), "read")
    if pos:
        fail("unknown arguments %r" % pos)
    rels = all_releases()  # newest first by creation, as GitHub lists them
    # Drafts are listed only to a token that may push (GitHub's REST "List releases": "Only
    # users with push access will receive listings for draft releases"; the GraphQL list gh uses
    # behaves alike for a job's read-only token, cli/cli#9076, whose answer is contents: write).
    if opts.get("exclude_drafts") == "true" or token_permissions().get("contents") != "write":
        rels = [r for r in rels if not r["isDraft"]]
    order = opts.get("order", "desc")
    if order not in ("asc", "desc"):
        fail('invalid argument "%s" for "--order" flag: valid values are {asc|desc}' % order)
    try:
        limit = int(opts.get("limit", "30"))
    except ValueError:
        fail('invalid argument "%s" for "-L, --limit" flag' % opts["limit"])
    if limit < 1:
        # gh itself sends `first: <limit>` to GraphQL, which refuses it; the stand-in refuses
        # earlier rather than imitate an answer nobody here has seen.
        fail("invalid limit: %d" % limit)
    if order == "asc":
        rels.reverse()
    rels = rels[:limit]
    if "json" in opts:
        # http.go `releaseFields`.
        allowed = {"createdAt", "isDraft", "isLatest", "isPrerelease", "name", "publishedAt", "tagName"}
        fields = opts["json"].split(",")
        for f in fields:
            if f not in allowed:
                fail("Unknown JSON field: %s\nAvailable fields:\n  %s" % (json.dumps(f), "\n  ".join(sorted(allowed))))
        emit([{f: view_json(r, f)[f] for f in fields} for r in rels], opts)
    else:
        no_jq_without_json(opts)
        for r in rels:
            kind = "Draft" if r["isDraft"] else ("Latest" if r.get("isLatest") else "")
            print("%s\t%s\t%s\t%s" % (r["title"], kind, r["tagName"], r.get("publishedAt") or r["createdAt"]))


def cmd_delete_asset(args):
    pos, opts = parse(args, dict(REPO), {"-y": "yes", "--yes": "yes"})
    access(opts.get("repo"), "write")
    if len(pos) != 2:
        fail("accepts 2 arg(s), received %d" % len(pos))
    rel = must_get(pos[0])
    path = os.path.join(release_dir(rel["tagName"]), "assets", pos[1])
    if not os.path.exists(path):
        fail("asset %s not found in release %s" % (pos[1], pos[0]))
    if not rel["isDraft"]:
        refuse_immutable_asset_change(rel, pos[1], True)
    os.remove(path)


SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"


def attestation_stores(repo, owner):
    """The attestation stores `--repo`/`--owner` name: (repository, path) pairs."""
    stores = [(REPOSITORY.lower(), os.path.join(STATE, "attestations.jsonl"))]
    stores += [(r, os.path.join(d, "attestations.jsonl")) for r, d in FOREIGN.items()]
    if repo:
        return [(r, p) for r, p in stores if r == repo.lower()]
    return [(r, p) for r, p in stores if r.split("/")[0] == owner.lower()]


def read_records(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


# gh's --signer-workflow, as cli/cli pkg/cmd/attestation/verify/policy.go builds it (the
# version with signerWorkflowSANPattern, after 2.60.0; 2.60.0 itself anchored only the start):
# a value that starts with a host (hostRegex `^[a-zA-Z0-9-]+\.[a-zA-Z0-9-]+.*$`) is taken as
# `https://<value>`, any other gets `https://<hostname>/` (github.com) in front; the pattern is
# `^` + QuoteMeta(url) + `(@(refs/.*|[0-9a-fA-F]+))?$`, or `$` alone when the value already ends
# in such a ref. It is matched against the certificate's subject alternative name (sigstore-go
# SANMatcher, regexp.MatchString), case-sensitively: no `(?i)`, unlike --repo's pattern.
HOST_REGEX = re.compile(r"^[a-zA-Z0-9-]+\.[a-zA-Z0-9-]+.*$")
SIGNER_WORKFLOW_REF = r"@(refs/.*|[0-9a-fA-F]+)"


def signer_workflow_pattern(wanted, hostname="github.com"):
    url = "https://" + wanted if HOST_REGEX.match(wanted) else "https://%s/%s" % (hostname, wanted)
    pattern = "^" + re.escape(url)
    if re.search(SIGNER_WORKFLOW_REF + "$", url):
        return re.compile(pattern + "$")
    return re.compile(pattern + "(" + SIGNER_WORKFLOW_REF + ")?$")


def certificate(rec):
    """The fields of the Fulcio certificate GitHub's attestation carries for this record
    (sigstore-go certificate.Summary, JSON names): for a workflow that is not a reusable one,
    the subject alternative name is the workflow's URL at the run's ref."""
    for key in ("source_ref", "runner_environment"):
        if key not in rec:
            fail("gh stand-in (replay harness): attestation record without %s: %r" % (key, rec))
    return {
        "subjectAlternativeName": "https://github.com/%s@%s" % (rec["signer_workflow"], rec["source_ref"]),
        "issuer": "https://token.actions.githubusercontent.com",
        "buildSignerURI": "https://github.com/%s@%s" % (rec["signer_workflow"], rec["source_ref"]),
        "runnerEnvironment": rec["runner_environment"],
        "sourceRepositoryURI": "https://github.com/" + rec["repository"],
        "sourceRepositoryRef": rec["source_ref"],
        "sourceRepositoryOwnerURI": "https://github.com/" + rec["repository"].split("/")[0],
    }


def docker_config_auths():
    """The `auths` of the docker config gh reads: gh resolves an oci:// subject through
    go-containerregistry's authn.DefaultKeychain (cli/cli pkg/cmd/attestation/artifact/oci/
    client.go, v2.60.0: remote.Get with authn.DefaultKeychain), which reads
    $DOCKER_CONFIG/config.json, else ~/.docker/config.json (docker/cli
    cli/config), and nothing else: no environment variable carries registry credentials."""
    d = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    try:
        with open(os.path.join(d, "config.json")) as f:
            return json.load(f).get("auths", {})
    except (FileNotFoundError, NotADirectoryError):
        return {}


def require_registry_credentials(registry, target, state_dirs):
    """A registry listed in the repository's state `private-registries` answers 401 without
    credentials, as a private package does: the real gh fetches the subject's manifest from the
    registry before it looks for attestations."""
    private = []
    for d in state_dirs:
        try:
            with open(os.path.join(d, "private-registries")) as f:
                private += f.read().split()
        except FileNotFoundError:
            pass
    if registry not in private:
        return
    auths = docker_config_auths()
    if not any(k in auths and auths[k].get("auth") for k in (registry, "https://" + registry)):
        fail("failed to digest artifact: GET https://%s/v2/: UNAUTHORIZED: authentication required "
             "(%s; no credentials for %s in the docker config)" % (registry, target, registry))


# Offline verification of Sigstore bundles: `gh attestation verify --bundle FILE
# --custom-trusted-root FILE`, as cli/cli v2.60.0 does it (pkg/cmd/attestation/verification/
# attestation.go GetLocalAttestations: `.json` is one bundle, `.jsonl` one a line;
# sigstore.go chooseVerifier: the trusted root whose Fulcio CA's lowest certificate has the
# leaf's issuer organization, "unable to use provided trusted roots" when none; Verify: every
# bundle must verify, the first that does not ends it with `verifying with issuer "<org>"`;
# extensions.go VerifyCertExtensions: owner, repository and OIDC issuer, case-insensitively).
# What sigstore-go's SignedEntityVerifier checks is done with the openssl command line tool:
# the DSSE signature over the PAE with the leaf's key, the leaf's chain to the CA at the
# transparency log's integrated time, the log entry's signed entry timestamp with the log's
# key, its inclusion proof up to the signed checkpoint, and that the entry logs this
# envelope's certificate and signature. Not emulated, and refused rather than passed: RFC 3161
# timestamps (GitHub's own instance), message signatures, bundles before v0.2.
FULCIO = "1.3.6.1.4.1.57264.1."


def der_item(b, i):
    """The DER item at b[i]: (tag, start of its contents, end)."""
    tag, n = b[i], b[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(b[i:i + k], "big")
        i += k
    return tag, i, i + n


def der_items(b, start, end):
    out, i = [], start
    while i < end:
        item = der_item(b, i)
        out.append(item)
        i = item[2]
    return out


def oid_text(raw):
    parts, v = [min(raw[0] // 40, 2), raw[0] - 40 * min(raw[0] // 40, 2)], 0
    for c in raw[1:]:
        v = (v << 7) | (c & 0x7F)
        if not c & 0x80:
            parts.append(v)
            v = 0
    return ".".join(map(str, parts))


def der_time(tag, raw):
    text = raw.decode()
    if tag == 0x17:  # UTCTime, YYMMDDHHMMSSZ (RFC 5280 4.1.2.5.1)
        year = int(text[:2])
        text = ("19" if year >= 50 else "20") + text
    return calendar.timegm(time.strptime(text[:14], "%Y%m%d%H%M%S"))


def certificate_fields(der):
    """What gh's policy reads of an X.509 certificate (RFC 5280 4.1): the issuer's
    organizations, the validity, the subject alternative name's URIs and the Fulcio
    extensions (sigstore/fulcio docs/oid-info.md: .8 and later are DER UTF8Strings)."""
    _, cs, _ = der_item(der, 0)
    _, ts, te = der_item(der, cs)
    tbs = der_items(der, ts, te)
    k = 1 if tbs[0][0] == 0xA0 else 0
    issuer, validity = tbs[k + 2], tbs[k + 3]
    orgs = []
    for rdn in der_items(der, issuer[1], issuer[2]):
        for atv in der_items(der, rdn[1], rdn[2]):
            (_, os_, oe), (_, vs, ve) = der_items(der, atv[1], atv[2])[:2]
            if oid_text(der[os_:oe]) == "2.5.4.10":
                orgs.append(der[vs:ve].decode("utf-8", "replace"))
    (t1, s1, e1), (t2, s2, e2) = der_items(der, validity[1], validity[2])
    extensions = {}
    for tag, s, e in tbs:
        if tag == 0xA3:
            _, ss, se = der_item(der, s)
            for _, xs, xe in der_items(der, ss, se):
                parts = der_items(der, xs, xe)
                extensions[oid_text(der[parts[0][1]:parts[0][2]])] = der[parts[-1][1]:parts[-1][2]]
    uris = []
    if "2.5.29.17" in extensions:
        v = extensions["2.5.29.17"]
        _, s, e = der_item(v, 0)
        uris = [v[a:b].decode() for tag, a, b in der_items(v, s, e) if tag == 0x86]

    def fulcio(n):
        v = extensions.get(FULCIO + str(n))
        if v is None:
            return ""
        _, s, e = der_item(v, 0)
        return v[s:e].decode("utf-8", "replace")
    return {
        "issuer_organizations": orgs,
        "not_before": der_time(t1, der[s1:e1]),
        "not_after": der_time(t2, der[s2:e2]),
        # sigstore-go certificate.Summary, JSON names.
        "summary": {
            "subjectAlternativeName": uris[0] if uris else "",
            "issuer": fulcio(8),
            "buildSignerURI": fulcio(9),
            "runnerEnvironment": fulcio(11),
            "sourceRepositoryURI": fulcio(12),
            "sourceRepositoryDigest": fulcio(13),
            "sourceRepositoryRef": fulcio(14),
            "sourceRepositoryOwnerURI": fulcio(16),
            "runInvocationURI": fulcio(21),
        },
    }


def pem(der):
    body = base64.b64encode(der).decode()
    return "-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n" % "\n".join(
        body[i:i + 64] for i in range(0, len(body), 64))


def openssl(args, scratch, **files):
    """Runs `openssl ARGS` in `scratch`, with each keyword written there as a file first; its
    standard output when it exited 0, else None."""
    for name, data in files.items():
        with open(os.path.join(scratch, name), "wb") as f:
            f.write(data)
    r = subprocess.run(["openssl"] + args, cwd=scratch, capture_output=True)
    return r.stdout if r.returncode == 0 else None


def signature_verifies(public_key_der, signature, message, scratch):
    return openssl(["dgst", "-sha256", "-keyform", "DER", "-verify", "key.der", "-signature", "sig.bin",
                    "msg.bin"], scratch, **{"key.der": public_key_der, "sig.bin": signature,
                                            "msg.bin": message}) is not None


def leaf_public_key(leaf_der, scratch):
    """The leaf certificate's public key, DER (SubjectPublicKeyInfo), or None."""
    public = openssl(["x509", "-inform", "DER", "-in", "leaf.der", "-pubkey", "-noout"], scratch,
                     **{"leaf.der": leaf_der})
    if public is None:
        return None
    return openssl(["pkey", "-pubin", "-in", "public.pem", "-outform", "DER"], scratch,
                   **{"public.pem": public})


def load_bundle_file(path):
    """GetLocalAttestations: the bundles of a `.json` or `.jsonl` file."""
    ext = os.path.splitext(path)[1]
    if ext not in (".json", ".jsonl"):
        fail("bundle file extension not supported, must be json or jsonl")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        fail("bundle%s could not be loaded from JSON%s file at %s" % (
            "s" if ext == ".jsonl" else "", " lines" if ext == ".jsonl" else "", path))
    try:
        if ext == ".json":
            return [json.loads(text)]
        bundles = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        fail("bundle content could not be parsed")
    if not bundles:
        fail("provided bundle file is empty")
    return bundles


def load_trusted_roots(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]
    except OSError as e:
        fail("unable to read file %s: %s" % (path, e))
    except ValueError as e:
        fail("failed to create custom verifier: %s" % e)


def b64d(text):
    return base64.b64decode(text)


def leaf_of(bundle):
    vm = bundle.get("verificationMaterial", {})
    if "certificate" in vm:
        return b64d(vm["certificate"]["rawBytes"])
    chain = vm.get("x509CertificateChain", {}).get("certificates", [])
    return b64d(chain[0]["rawBytes"]) if chain else None


def bundle_version_ok(media_type):
    m = re.match(r"application/vnd\.dev\.sigstore\.bundle(?:\.v(\d+)\.(\d+)\+json|\+json;version=(\d+)\.(\d+))$",
                 media_type or "")
    if not m:
        return False
    major, minor = [int(x) for x in (m.group(1, 2) if m.group(1) else m.group(3, 4))]
    return (major, minor) >= (0, 2)


def choose_root(leaf, roots):
    """chooseVerifier: the root whose Fulcio CA's lowest certificate (the first of its chain)
    has the leaf's issuer organization."""
    orgs = certificate_fields(leaf)["issuer_organizations"]
    if len(orgs) != 1:
        fail("✗ Verification failed\n\nError: failed to find recognized issuer from bundle content: expected "
             "the leaf certificate issuer to only have one organization")
    for root in roots:
        for ca in root.get("certificateAuthorities", []):
            chain = ca.get("certChain", {}).get("certificates", [])
            if not chain:
                continue
            lowest = certificate_fields(b64d(chain[0]["rawBytes"]))["issuer_organizations"]
            if lowest and lowest[0] == orgs[0]:
                return orgs[0], root
    fail("✗ Verification failed\n\nError: failed to find recognized issuer from bundle content: unable to use "
         "provided trusted roots")


def merkle_root(index, size, leaf_hash, proof):
    """RFC 9162 2.1.3.2: the root an inclusion proof gives."""
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


def verify_bundle(bundle, digest, root, scratch):
    """Why `bundle` does not verify for `digest` under `root` as sigstore-go checks it, or None."""
    if "messageSignature" in bundle:
        return "gh stand-in (replay harness): message signatures are not emulated"
    envelope = bundle.get("dsseEnvelope")
    if not envelope:
        return "no DSSE envelope"
    leaf = leaf_of(bundle)
    fields = certificate_fields(leaf)
    payload = b64d(envelope["payload"])
    ptype = envelope["payloadType"].encode()
    pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(payload), payload)
    key = leaf_public_key(leaf, scratch)
    signatures = envelope.get("signatures", [])
    if key is None or len(signatures) != 1 or not signature_verifies(key, b64d(signatures[0]["sig"]), pae, scratch):
        return "failed to verify signature: the envelope's signature does not verify with the leaf certificate's key"
    statement = json.loads(payload)
    hexpart = digest.split(":", 1)[1]
    if not any(s.get("digest", {}).get("sha256") == hexpart for s in statement.get("subject", [])):
        return "provided artifact digest does not match any digest in statement"
    tsas = bundle.get("verificationMaterial", {}).get("timestampVerificationData", {}).get("rfc3161Timestamps")
    if tsas:
        return "gh stand-in (replay harness): RFC 3161 timestamps are not emulated"
    entries = bundle.get("verificationMaterial", {}).get("tlogEntries", [])
    logs = {t["logId"]["keyId"]: t for t in root.get("tlogs", [])}
    if not entries:
        return "threshold not met for verified log entry integrated timestamps: 0 < 1"
    entry = entries[0]
    log = logs.get(entry["logId"]["keyId"])
    if log is None:
        return "unable to find tlog information for key %s" % entry["logId"]["keyId"]
    log_key = b64d(log["publicKey"]["rawBytes"])
    body = entry["canonicalizedBody"]
    # Rekor v1's signed entry timestamp: canonical JSON of body, integratedTime, logID, logIndex.
    promise = json.dumps({"body": body, "integratedTime": int(entry["integratedTime"]),
                          "logID": b64d(entry["logId"]["keyId"]).hex(), "logIndex": int(entry["logIndex"])},
                         sort_keys=True, separators=(",", ":")).encode()
    set_b64 = entry.get("inclusionPromise", {}).get("signedEntryTimestamp")
    if not set_b64 or not signature_verifies(log_key, b64d(set_b64), promise, scratch):
        return "unable to verify signed entry timestamp"
    proof = entry.get("inclusionProof")
    if proof:
        leaf_hash = hashlib.sha256(b"\x00" + b64d(body)).digest()
        got = merkle_root(int(proof["logIndex"]), int(proof["treeSize"]), leaf_hash,
                          [b64d(h) for h in proof["hashes"]])
        if got is None or got != b64d(proof["rootHash"]):
            return "inclusion proof does not lead to the root hash"
        note = proof["checkpoint"]["envelope"]
        text, _, signed = note.partition("\n\n")
        lines = text.split("\n")
        if len(lines) < 3 or lines[1] != proof["treeSize"] or lines[2] != proof["rootHash"]:
            return "the checkpoint is not of the proof's tree"
        sig = b64d(signed.strip().split(" ")[-1])[4:]
        if not signature_verifies(log_key, sig, (text + "\n").encode(), scratch):
            return "unable to verify checkpoint signature"
    # The entry must log this envelope: its certificate and signature (dsse 0.0.1's
    # `signatures[].verifier`/`signature`, intoto 0.0.2's `content.envelope.signatures[]`).
    spec = json.loads(b64d(body)).get("spec", {})
    logged = spec.get("signatures") or spec.get("content", {}).get("envelope", {}).get("signatures", [])
    sig_text = signatures[0]["sig"]
    cert_pem = pem(leaf).encode()

    def pem_der(text):
        body = re.sub(r"-----[A-Z ]+-----|\s", "", text.decode("ascii", "replace"))
        try:
            return b64d(body)
        except ValueError:
            return b""
    ok = False
    for item in logged:
        verifier = pem_der(b64d(item.get("verifier") or item.get("publicKey") or ""))
        signature = item.get("signature") or item.get("sig") or ""
        if signature != sig_text:
            try:
                signature = b64d(signature).decode()
            except ValueError:
                pass
        ok |= signature == sig_text and verifier == leaf
    if not ok:
        return "the transparency log entry does not log this envelope"
    at = int(entry["integratedTime"])
    if not fields["not_before"] <= at <= fields["not_after"]:
        return "certificate was not valid at the log's integrated time"
    for ca in root.get("certificateAuthorities", []):
        chain = [b64d(c["rawBytes"]) for c in ca.get("certChain", {}).get("certificates", [])]
        if not chain:
            continue
        files = {"leaf.pem": cert_pem, "ca.pem": pem(chain[-1]).encode(),
                 "intermediates.pem": "".join(pem(c) for c in chain[:-1]).encode()}
        args = ["verify", "-attime", str(at), "-CAfile", "ca.pem"]
        if len(chain) > 1:
            args += ["-untrusted", "intermediates.pem"]
        if openssl(args + ["leaf.pem"], scratch, **files) is not None:
            return None
    return "certificate does not chain to the trusted root"


def bundles_and_roots(opts):
    """`--bundle`: the bundles of the file, verified offline against `--custom-trusted-root`
    (without it gh fetches Sigstore's roots through TUF, which this machine cannot reach)."""
    if "custom_trusted_root" not in opts:
        fail("failed to create TUF client: gh stand-in (replay harness): no network for Sigstore's TUF "
             "repository; give --custom-trusted-root")
    bundles = load_bundle_file(opts["bundle"])
    roots = load_trusted_roots(opts["custom_trusted_root"])
    return bundles, roots


def cmd_attestation_verify(args):
    pos, opts = parse(args, {"-R": "repo", "--repo": "repo", "-o": "owner", "--owner": "owner",
                             "--signer-workflow": "signer_workflow", "--predicate-type": "predicate_type",
                             "--format": "format", "-d": "digest_alg", "--digest-alg": "digest_alg",
                             "--hostname": "hostname", "-L": "limit", "--limit": "limit",
                             "--source-ref": "source_ref", "-b": "bundle", "--bundle": "bundle",
                             "--custom-trusted-root": "custom_trusted_root"},
                      {"--deny-self-hosted-runners": "deny_self_hosted"})
    token_permissions()
    if len(pos) != 1:
        fail("accepts 1 arg(s), received %d" % len(pos))
    if ("repo" in opts) == ("owner" in opts):
        fail("specify only one of `--owner` or `--repo`" if "repo" in opts else "one of `--owner` or `--repo` must be specified")
    if opts.get("digest_alg", "sha256") != "sha256":
        fail("gh stand-in (replay harness): only --digest-alg sha256 is emulated")
    if opts.get("format", "json") != "json":
        fail('invalid argument "%s" for "--format" flag: valid values are {json}' % opts["format"])
    if "repo" in opts and opts["repo"].count("/") != 1:
        fail("invalid value provided for repo: %s" % opts["repo"])
    target = pos[0]
    subject_name = None
    if target.startswith("oci://"):
        ref = target[len("oci://"):]
        if "@sha256:" not in ref:
            fail("gh stand-in (replay harness): %s has no @sha256: digest; the real gh resolves a tag in the "
                 "registry, the stand-in verifies digest references only" % target)
        subject_name, digest = ref.split("@", 1)
        hexpart = digest[len("sha256:"):]
        if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
            fail("invalid digest in %s" % target)
        state_dirs = [os.path.dirname(p) for _, p in attestation_stores(opts.get("repo"), opts.get("owner"))]
        require_registry_credentials(subject_name.split("/", 1)[0], target, state_dirs)
        shown = target
    else:
        if not os.path.isfile(target):
            fail("failed to digest artifact: open %s: no such file or directory" % target)
        with open(target, "rb") as f:
            digest = "sha256:" + hashlib.sha256(f.read()).hexdigest()
        shown = "file://" + target
    predicate = opts.get("predicate_type", SLSA_PROVENANCE)
    sys.stderr.write("Loaded digest %s for %s\n" % (digest, shown))
    pattern = signer_workflow_pattern(opts["signer_workflow"], opts.get("hostname", "github.com")) \
        if "signer_workflow" in opts else None
    if "bundle" in opts:
        matched = verified_local_attestations(opts, digest, predicate, pattern)
        print_verified(opts, digest, matched)
        return
    found = []
    for repo, path in attestation_stores(opts.get("repo"), opts.get("owner")):
        for rec in read_records(path):
            if rec["repository"].lower() != repo:
                continue
            if not any(s["digest"] == digest and (subject_name is None or s["name"] == subject_name) for s in rec["subjects"]):
                continue
            found.append(rec)
    scope = opts.get("repo") or opts.get("owner")
    if not found:
        fail("✗ Loading attestations from GitHub API failed\n\nError: no attestations found for subject %s "
             "(%s) in %s: no matching attestations found" % (digest, target, scope))
    sys.stderr.write("Loaded %d attestation(s) from GitHub API\n" % len(found))
    by_predicate = [r for r in found if r["predicate_type"] == predicate]
    if not by_predicate:
        fail("✗ Verification failed\n\nError: no matching attestations found: %s has no attestation with "
             "predicate type %s (found: %s)" % (target, predicate, ", ".join(sorted({r["predicate_type"] for r in found}))))
    # gh keeps the attestations whose certificate meets every criterion and fails when none
    # does (verification/extensions.go VerifyCertExtensions: "at least one"), naming the last
    # mismatch. SourceRepositoryRef is compared with strings.EqualFold; --deny-self-hosted-runners
    # sets the expected RunnerEnvironment to "github-hosted" (policy.go newEnforcementCriteria).
    matched, why = [], None
    for r in by_predicate:
        cert = certificate(r)
        why = identity_refusal(cert, opts, pattern)
        if why is None:
            matched.append(({
                "_type": "https://in-toto.io/Statement/v1",
                "subject": [{"name": s["name"], "digest": {"sha256": s["digest"][len("sha256:"):]}} for s in r["subjects"]],
                "predicateType": r["predicate_type"],
            }, cert))
    if not matched:
        fail("✗ Verification failed\n\nError: no attestation matched the policy: %s" % why)
    print_verified(opts, digest, matched)


def identity_refusal(cert, opts, pattern):
    """Why a certificate fails the identity gh's policy asks for, or None."""
    if pattern is not None and not pattern.search(cert["subjectAlternativeName"]):
        return "expected SAN to match %s, got %s" % (pattern.pattern, cert["subjectAlternativeName"])
    if "source_ref" in opts and opts["source_ref"].lower() != cert["sourceRepositoryRef"].lower():
        return "expected SourceRepositoryRef to be %s, got %s" % (opts["source_ref"], cert["sourceRepositoryRef"])
    if opts.get("deny_self_hosted") == "true" and cert["runnerEnvironment"] != "github-hosted":
        return "expected RunnerEnvironment to be github-hosted, got %s" % cert["runnerEnvironment"]
    return None


def verified_local_attestations(opts, digest, predicate, pattern):
    """runVerify with --bundle: the file's bundles of the predicate type, each verified
    (signature, chain, log, digest, identity: the first failure ends it), then
    VerifyCertExtensions on all of them. [(statement, certificate summary)]."""
    bundles, roots = bundles_and_roots(opts)
    sys.stderr.write("Loaded %d attestation%s from %s\n" % (len(bundles), "" if len(bundles) == 1 else "s",
                                                          opts["bundle"]))

    def statement_of(b):
        try:
            return json.loads(b64d(b["dsseEnvelope"]["payload"]))
        except (KeyError, ValueError):
            return {}
    by_predicate = [b for b in bundles if statement_of(b).get("predicateType") == predicate]
    if not by_predicate:
        fail("✗ No attestations found with predicate type: %s" % predicate)
    matched = []
    with tempfile.TemporaryDirectory() as scratch:
        for b in by_predicate:
            if not bundle_version_ok(b.get("mediaType")):
                fail("✗ Verification failed\n\nError: failed to find recognized issuer from bundle content: "
                     "unsupported bundle version: %s" % b.get("mediaType"))
            leaf = leaf_of(b)
            if leaf is None:
                fail("✗ Verification failed\n\nError: failed to find recognized issuer from bundle content: "
                     "leaf cert not found")
            issuer, root = choose_root(leaf, roots)
            cert = certificate_fields(leaf)["summary"]
            why = verify_bundle(b, digest, root, scratch) or identity_refusal(cert, opts, pattern)
            if why is not None:
                sys.stderr.write("Failed to verify against issuer \"%s\": %s\n" % (issuer, why))
                fail("✗ Verification failed\n\nError: verifying with issuer \"%s\"" % issuer)
            matched.append((statement_of(b), cert))
    scope = opts.get("repo") or opts.get("owner")
    owner = scope.split("/")[0]
    for _, cert in matched:
        checks = [("SourceRepositoryOwnerURI", "https://github.com/" + owner, cert["sourceRepositoryOwnerURI"])]
        if "repo" in opts:
            checks.append(("SourceRepositoryURI", "https://github.com/" + opts["repo"], cert["sourceRepositoryURI"]))
        checks.append(("Issuer", "https://token.actions.githubusercontent.com", cert["issuer"]))
        for name, want, got in checks:
            if want.lower() != got.lower():
                fail("✗ Verification failed\nexpected %s to be %s, got %s" % (name, want, got))
    return matched


def print_verified(opts, digest, matched):
    """What gh prints for attestations that passed: the JSON of `--format json`, or the table."""
    if opts.get("format") == "json":
        print(json.dumps([{"verificationResult": {"statement": statement, "signature": {"certificate": cert}}}
                          for statement, cert in matched], indent=2))
        return
    print("\u2713 Verification succeeded!\n\n%s was attested by:\nREPO\tPREDICATE_TYPE\tWORKFLOW" % digest)
    for statement, cert in matched:
        repo = cert["sourceRepositoryURI"][len("https://github.com/"):]
        print("%s\t%s\t%s" % (repo, statement.get("predicateType"), cert["buildSignerURI"][len("https://github.com/"):]))


def cmd_attestation_trusted_root(args):
    """`gh attestation trusted-root`: the trusted roots for offline verification, each as one
    compact JSON line (cli/cli v2.60.0 pkg/cmd/attestation/trustedroot/trustedroot.go: no
    authentication needed, `cmdutil.DisableAuthCheck`; the public-good root then GitHub's, each
    fetched through TUF and printed with `json.Compact`). The stand-in prints the root the test
    registered with Replay::sigstore (its signer's CA and logs stand in for both instances);
    without one it fails as gh does when TUF cannot be reached. `--tuf-url`/`--tuf-root`,
    `--verify-only` and `--hostname` are not emulated."""
    if args:
        fail("gh stand-in (replay harness): `gh attestation trusted-root` takes no flags here; got %s" % " ".join(args))
    maybe_fail_once(["attestation", "trusted-root"])
    try:
        with open(os.path.join(STATE, "trusted_root.jsonl")) as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
    except FileNotFoundError:
        fail("Failed to verify the TUF repository: failed to create TUF client: the replay registered "
             "no Sigstore trusted root (Replay::sigstore)")
    for line in lines:
        print(json.dumps(json.loads(line), separators=(",", ":")))


def cmd_api(args):
    """`gh api repos/OWNER/NAME [--jq EXPR]`: the repository's default branch as GitHub's REST
    API reports it (GET /repos/{owner}/{repo} -> default_branch); nothing else is emulated."""
    pos, opts = parse(args, {"-q": "jq", "--jq": "jq", "-H": "header", "--header": "header"}, {})
    if len(pos) != 1 or not re.fullmatch(r"repos/[^/]+/[^/]+", pos[0]):
        fail("gh stand-in (replay harness): only `gh api repos/OWNER/NAME` is emulated; got `gh api %s`" % " ".join(args))
    repo = pos[0][len("repos/"):]
    token_permissions()
    foreign = check_repo(repo)
    state = FOREIGN[foreign] if foreign else STATE
    try:
        with open(os.path.join(state, "repository.json")) as f:
            info = json.load(f)
    except FileNotFoundError:
        fail("gh stand-in (replay harness): no repository.json for %s (set_default_branch)" % repo)
    info = dict(info, full_name=repo)
    emit(info, opts)


COMMANDS = {"view": cmd_view, "create": cmd_create, "upload": cmd_upload, "edit": cmd_edit,
            "download": cmd_download, "list": cmd_list, "delete-asset": cmd_delete_asset,
            "delete": cmd_delete}


def main(argv):
    if argv[:1] == ["api"]:
        cmd_api(argv[1:])
        return
    if argv[:2] == ["attestation", "trusted-root"]:
        cmd_attestation_trusted_root(argv[2:])
        return
    if argv[:1] == ["attestation"]:
        if argv[1:2] != ["verify"]:
            fail("gh stand-in (replay harness): only `gh attestation verify` and `trusted-root` are emulated; got `gh %s`" % " ".join(argv))
        token_permissions()
        maybe_fail_once(argv[:2])
        cmd_attestation_verify(argv[2:])
        return
    if len(argv) < 2 or argv[0] != "release" or argv[1] not in COMMANDS:
        fail("gh stand-in (replay harness): only `gh release %s` and `gh attestation verify` are emulated; got `gh %s`"
             % ("|".join(sorted(COMMANDS)), " ".join(argv)))
    token_permissions()  # gh checks authentication before anything else
    maybe_fail_once(argv[:2])
    COMMANDS[argv[1]](argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
