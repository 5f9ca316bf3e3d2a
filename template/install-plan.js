// The install plan of the coding-agent template: splits template/package-lock.json into one
// share per install group, so that each group is installed in its own Dockerfile stage and
// shipped as its own image layer (see the Dockerfile's `install-plan` stage).
//
//     node install-plan.js LOCK_DIR OUT_DIR GROUP=PACKAGE...
//
// LOCK_DIR holds the template's package.json and package-lock.json. Each GROUP=PACKAGE names a
// group and the top-level package it is built around; every other dependency of package.json
// goes into the group `rest`. For each group, OUT_DIR/GROUP/package.json and
// OUT_DIR/GROUP/package-lock.json are written: the template's files cut down to the group's
// roots and the lock entries they need, so `npm ci` in that directory installs exactly the
// group's share. AGENT_COMMANDS (the environment, as the Dockerfile's `npm` stage sets it) lists
// the commands the image must provide.
//
// Why a group's share is written as files: the classic builder keys a COPY by the content of what
// it copies, so a group's stage runs `npm ci` again only when its own share of the lock changed.
// A bump then re-installs one group, and the other groups' layers stay byte for byte the same.
//
// The plan fails (exit 1, one `install plan: ...` line on stderr) rather than write a split that
// would install something else than the lock:
// - a package two groups need: each layer would need its own copy;
// - a lock entry no dependency needs: no group would install it;
// - a bin two groups provide: node_modules/.bin would keep only the later layer's;
// - a command of AGENT_COMMANDS that no package provides: the image would lack it.
//
// It runs in a builder stage only, with the Node of the build; it needs nothing but `fs`.

"use strict";

const fs = require("fs");

const [lockDir, out, ...specs] = process.argv.slice(2);

// One line naming what is wrong, then a failed build.
const fail = (message) => {
    console.error("install plan: " + message);
    process.exit(1);
};

if (!lockDir || !out) {
    fail("usage: node install-plan.js LOCK_DIR OUT_DIR GROUP=PACKAGE... (the Dockerfile's install-plan stage runs it)");
}

const pkg = JSON.parse(fs.readFileSync(lockDir + "/package.json"));
const lock = JSON.parse(fs.readFileSync(lockDir + "/package-lock.json"));
// The lock's entries by install path: "" is the root, "node_modules/a/node_modules/b" is a
// copy of b nested under a.
const all = lock.packages;

// Where Node's resolution finds `dep` when required from the package installed at `from`: the
// nearest node_modules/dep going up the tree from `from`, as npm laid the lock out. Null when
// no level has it.
const locate = (from, dep) => {
    for (let dir = from; ; ) {
        const path = (dir ? dir + "/" : "") + "node_modules/" + dep;
        if (all[path]) return path;
        if (!dir) return null;
        const cut = dir.lastIndexOf("/node_modules/");
        dir = cut < 0 ? "" : dir.slice(0, cut);
    }
};

// Every lock entry the packages `roots` need: their dependencies, optional dependencies and peer
// dependencies, transitively. An optional dependency, or an optional peer, that the lock lacks is
// one npm left out (another platform's binary); a required one that it lacks fails the plan.
const closure = (roots) => {
    const seen = new Set();
    // [the path of the dependent ("" for package.json), the dependency's name, optional?]
    const todo = roots.map((name) => ["", name, false]);
    while (todo.length) {
        const [from, dep, optional] = todo.pop();
        const path = locate(from, dep);
        if (!path) {
            if (optional) continue;
            fail(dep + " (needed by " + (from || "package.json") + ") is not in the lock");
        }
        if (seen.has(path)) continue;
        seen.add(path);
        const entry = all[path];
        const meta = entry.peerDependenciesMeta || {};
        for (const d of Object.keys(entry.dependencies || {})) todo.push([path, d, false]);
        for (const d of Object.keys(entry.optionalDependencies || {})) todo.push([path, d, true]);
        for (const d of Object.keys(entry.peerDependencies || {})) {
            todo.push([path, d, !!(meta[d] && meta[d].optional)]);
        }
    }
    return seen;
};

// [group, root...] for each GROUP=PACKAGE, then `rest` with every other dependency.
const groups = specs.map((spec) => spec.split("="));
const named = new Set(groups.map(([, name]) => name));
for (const name of named) {
    if (!(name in pkg.dependencies)) fail(name + " is not in package.json");
}
groups.push(["rest", ...Object.keys(pkg.dependencies).filter((name) => !named.has(name))]);

// Which group installs each lock entry: one at most.
const owner = new Map();
for (const [group, ...roots] of groups) {
    const paths = closure(roots);
    for (const path of paths) {
        if (owner.has(path)) {
            fail(path + " is needed by both " + owner.get(path) + " and " + group + "; one layer each cannot hold it");
        }
        owner.set(path, group);
    }
    // The group's package.json and lock: the template's, with only the group's roots as
    // dependencies and only the entries they need, in the lock's own order.
    const dependencies = Object.fromEntries(roots.map((name) => [name, pkg.dependencies[name]]));
    const packages = { "": { ...all[""], dependencies } };
    for (const [path, entry] of Object.entries(all)) {
        if (paths.has(path)) packages[path] = entry;
    }
    const dir = out + "/" + group;
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(dir + "/package.json", JSON.stringify({ ...pkg, dependencies }, null, 2) + "\n");
    fs.writeFileSync(dir + "/package-lock.json", JSON.stringify({ ...lock, packages }, null, 2) + "\n");
    console.log("build: install group " + group + ": " + roots.join(" ") + " (" + paths.size + " packages)");
}

// Every entry `npm ci --omit=dev` would install belongs to a group, or the split installs less
// than the lock.
const stray = Object.keys(all).filter((path) => path && !owner.has(path) && !all[path].dev);
if (stray.length) fail("the lock has packages no dependency needs: " + stray.join(" "));

// The bins of the top-level packages (node_modules/NAME or node_modules/@SCOPE/NAME), which npm
// links into node_modules/.bin: a name two groups provide would be overwritten by the later
// layer, so it must come from one group.
const bins = new Map();
for (const [path, entry] of Object.entries(all)) {
    if (!/^node_modules\/(@[^/]+\/)?[^/]+$/.test(path)) continue;
    for (const bin of Object.keys(entry.bin || {})) {
        const other = bins.get(bin);
        if (other && owner.get(other) !== owner.get(path)) {
            fail("the bin " + bin + " of " + path + " and of " + other + " would land in two layers");
        }
        bins.set(bin, path);
    }
}

// The image links each agent command into /usr/local/bin from node_modules/.bin.
if (process.env.AGENT_COMMANDS === undefined) {
    fail("AGENT_COMMANDS is not set: the Dockerfile's npm stage sets it from the build argument of that name");
}
for (const command of process.env.AGENT_COMMANDS.split(" ").filter(Boolean)) {
    if (!bins.has(command)) fail("the command " + command + " is not a bin of any package in the lock");
}
