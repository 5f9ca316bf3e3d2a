# The coding-agent template image: four native coding-agent CLIs (Codex, Claude Code, OpenCode,
# Pi), Playwright CLI, Debian's Chromium, TigerVNC and Openbox, on top of BASE_IMAGE.
#
# One Dockerfile for production and tests; only build arguments differ. `cargo xtask build`
# passes them from template/manifest.yaml, template/inventory.json and the lockfile; every
# argument without a default below is required and the build fails early without it.
#
# Written for the classic builder (Docker 20.10 through the Engine API): no BuildKit syntax.
# Downloads happen in builder stages only, so neither the tarballs nor the optional extra CA
# bundle of a TLS-inspecting proxy end up in any layer of the final image.

ARG BASE_IMAGE

# ---------------------------------------------------------------------------------------------
# Builder: download tools plus the trust store used for every download of this build.
FROM ${BASE_IMAGE} AS fetch-tools
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates curl; \
    rm -rf /var/lib/apt/lists/*
# `extra-ca*.pem` is a glob so the file is optional: `cargo xtask build --ca-bundle` (or the
# host's default bundle) puts it into the build context; a plain `docker build` works without
# it. The Dockerfile is named only so the COPY always has one source.
COPY Dockerfile extra-ca*.pem /tmp/build-ca/
RUN set -eu; \
    cp /etc/ssl/certs/ca-certificates.crt /tmp/build-ca/bundle.pem; \
    if [ -s /tmp/build-ca/extra-ca.pem ]; then \
        cat /tmp/build-ca/extra-ca.pem >> /tmp/build-ca/bundle.pem; \
        echo "build: extra CA bundle in use for downloads (builder stages only)"; \
    fi

# ---------------------------------------------------------------------------------------------
# Builder: Node and npm from the npm registry (nodejs.org is not reachable from every build
# machine), each tarball pinned by URL and verified against its sha512 from the inventory.
# The headers stay (node-gyp builds native addons against them with `--nodedir=/usr/local`),
# except OpenSSL's configuration for the 20 other operating systems and CPUs: 60 MB that no
# build on this image can use.
FROM fetch-tools AS node
ARG NODE_TARBALL_URL
ARG NODE_SHA512
ARG NPM_TARBALL_URL
ARG NPM_SHA512
ARG NODE_MINIMUM
ARG NODE_MAJOR
RUN set -eu; \
    for arg in NODE_TARBALL_URL NODE_SHA512 NPM_TARBALL_URL NPM_SHA512 NODE_MINIMUM NODE_MAJOR; do \
        eval "value=\${$arg:-}"; \
        [ -n "$value" ] || { echo "build argument $arg is required (cargo xtask build sets it)" >&2; exit 1; }; \
    done; \
    cd /tmp; \
    curl --fail --silent --show-error --location --retry 3 --cacert /tmp/build-ca/bundle.pem \
        -o node.tgz "$NODE_TARBALL_URL"; \
    curl --fail --silent --show-error --location --retry 3 --cacert /tmp/build-ca/bundle.pem \
        -o npm.tgz "$NPM_TARBALL_URL"; \
    printf '%s  node.tgz\n%s  npm.tgz\n' "$NODE_SHA512" "$NPM_SHA512" | sha512sum -c -; \
    prefix=/staging/node/usr/local; \
    mkdir -p "$prefix/lib/node_modules/npm" /tmp/node-package; \
    tar -xzf node.tgz -C /tmp/node-package --strip-components=1; \
    tar -xzf npm.tgz -C "$prefix/lib/node_modules/npm" --strip-components=1; \
    mkdir -p "$prefix/bin"; \
    install -m 0755 /tmp/node-package/bin/node "$prefix/bin/node"; \
    if [ -d /tmp/node-package/include ]; then cp -a /tmp/node-package/include "$prefix/"; fi; \
    case "$(dpkg --print-architecture)" in \
        amd64) openssl_arch=linux-x86_64 ;; \
        arm64) openssl_arch=linux-aarch64 ;; \
        *) echo "unsupported architecture $(dpkg --print-architecture)" >&2; exit 1 ;; \
    esac; \
    archs="$prefix/include/node/openssl/archs"; \
    if [ -d "$archs" ]; then \
        [ -d "$archs/$openssl_arch" ] || { echo "Node headers lack OpenSSL's $openssl_arch configuration" >&2; exit 1; }; \
        find "$archs" -mindepth 1 -maxdepth 1 ! -name "$openssl_arch" -exec rm -rf {} +; \
    fi; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$prefix/bin/npm"; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$prefix/bin/npx"; \
    rm -rf /tmp/node.tgz /tmp/npm.tgz /tmp/node-package; \
    version="$("$prefix/bin/node" --version)"; \
    version="${version#v}"; \
    major="${version%%.*}"; \
    if [ "$major" != "$NODE_MAJOR" ]; then \
        echo "Node $version is not on the $NODE_MAJOR.x line the template requires" >&2; exit 1; \
    fi; \
    lowest="$(printf '%s\n%s\n' "$NODE_MINIMUM" "$version" | sort -V | head -n1)"; \
    if [ "$lowest" != "$NODE_MINIMUM" ]; then \
        echo "Node $version is older than $NODE_MINIMUM (Pi needs it)" >&2; exit 1; \
    fi; \
    PATH="$prefix/bin:$PATH" npm --version; \
    echo "build: Node $version and npm verified"

# ---------------------------------------------------------------------------------------------
# Builder: npm for the agents' installs, the pinned npm with an explicit configuration (the
# host's ~/.npmrc never applies here). A builder stage's ENV stays in the builder.
FROM fetch-tools AS npm
COPY --from=node /staging/node/ /
ARG INSTALL_SCRIPTS_ALLOWED
ARG AGENT_COMMANDS
ENV NPM_CONFIG_USERCONFIG=/tmp/build-npmrc \
    NPM_CONFIG_CACHE=/tmp/npm-cache \
    NODE_EXTRA_CA_CERTS=/tmp/build-ca/bundle.pem \
    INSTALL_SCRIPTS_ALLOWED=${INSTALL_SCRIPTS_ALLOWED} \
    AGENT_COMMANDS=${AGENT_COMMANDS}
WORKDIR /opt/coding-agents
# `install-group GROUP` installs the share of the lock in /opt/coding-agents (see install-plan)
# and moves its node_modules to /staging/GROUP, the content of one final-image layer.
# Install scripts run only for the manifest's `install_scripts_allowed` (claude-code and
# opencode-ai swap a placeholder launcher for their native binary in postinstall): `npm ci`
# runs with --ignore-scripts, then `npm rebuild` runs the scripts of exactly those packages.
# Every other install script in the lock was reviewed and is listed, not run, under
# `install_scripts_skipped`; `cargo xtask lock` refuses one that is in neither list.
#
# OpenCode on x64: npm installs two builds of the same 177 MB binary, `opencode-linux-x64`
# (needs AVX2) and `opencode-linux-x64-baseline` (any x86-64 CPU), and opencode-ai's postinstall
# hard-links ONE of them into bin/opencode.exe, chosen by the BUILD machine's /proc/cpuinfo.
# There is no fallback at run time, so keeping both only costs 177 MB, and letting the build
# machine decide would make the image depend on the CI runner's CPU. We pin the baseline build:
# it starts on every x86-64 CPU a sandbox may land on (an AVX2 build dies with SIGILL on the
# rest, e.g. some nested or emulated virtual CPUs), and OpenCode's work is waiting on model
# APIs and tools, where AVX2 buys nothing measurable. The AVX2 package is removed, as npm
# itself leaves out optional platform packages that do not fit.
# musl builds: the image is glibc (Debian); npm skips packages whose `libc` is musl, and the
# loop removes any that a future npm or launcher puts there anyway.
# Source maps (*.map, about 44 MB): only debuggers read them; Node uses them for stack traces
# only with --enable-source-maps, and then falls back to the generated code's positions.
# TypeScript declarations stay: Pi's extension authors (and agents) read them.
# The startup check: every command of the group must start and print its version, or the build
# fails. It runs with a throwaway HOME so no CLI state lands in the image.
# Each group's own `.package-lock.json` (npm's cache of the tree it installed) is dropped: it
# would name one group only; npm reads node_modules itself when it is absent.
RUN set -eu; \
    for arg in INSTALL_SCRIPTS_ALLOWED AGENT_COMMANDS; do \
        eval "value=\${$arg:-}"; \
        [ -n "$value" ] || { echo "build argument $arg is required (cargo xtask build sets it)" >&2; exit 1; }; \
    done; \
    printf '%s\n' \
        'registry=https://registry.npmjs.org/' \
        'fund=false' 'audit=false' 'update-notifier=false' \
        'progress=false' 'loglevel=warn' \
        > /tmp/build-npmrc; \
    printf '%s\n' \
        '#!/bin/sh' \
        'set -eu' \
        'group="$1"' \
        'cd /opt/coding-agents' \
        'npm ci --omit=dev --ignore-scripts' \
        'allowed=""' \
        'for package in $INSTALL_SCRIPTS_ALLOWED; do' \
        '    if [ -d "node_modules/$package" ]; then allowed="$allowed $package"; fi' \
        'done' \
        'if [ -n "$allowed" ]; then npm rebuild $allowed; fi' \
        'baseline=node_modules/opencode-linux-x64-baseline/bin/opencode' \
        'if [ -e "$baseline" ]; then' \
        '    ln -f "$baseline" node_modules/opencode-ai/bin/opencode.exe' \
        '    rm -rf node_modules/opencode-linux-x64' \
        '    echo "build: opencode uses the x64 baseline build"' \
        'fi' \
        'for dir in node_modules/*-musl node_modules/*/*-musl; do' \
        '    if [ -e "$dir" ]; then echo "build: pruning $dir"; rm -rf "$dir"; fi' \
        'done' \
        'find node_modules -type f -name "*.map" -delete' \
        'rm -f node_modules/.package-lock.json' \
        'check_home="$(mktemp -d)"' \
        'for command in $AGENT_COMMANDS; do' \
        '    if [ -e "node_modules/.bin/$command" ]; then' \
        '        printf "build: %s --version: " "$command"' \
        '        HOME="$check_home" "node_modules/.bin/$command" --version' \
        '    fi' \
        'done' \
        'rm -rf "$check_home" /tmp/npm-cache /root/.npm /root/.cache' \
        'mkdir -p "/staging/$group/opt/coding-agents"' \
        'mv node_modules "/staging/$group/opt/coding-agents/"' \
        > /usr/local/bin/install-group; \
    chmod 0755 /usr/local/bin/install-group

# ---------------------------------------------------------------------------------------------
# Builder: the install plan. The lock is split into four groups, each installed in its own stage
# and shipped as its own final-image layer: the three large native CLIs (Claude Code, Codex,
# OpenCode, each with its platform packages, which its launcher hard-links or execs and so must
# stay in its layer) and the rest. This stage runs again on every bump, but it is cheap: a
# group's stage runs `npm ci` again only when its own share of the lock changed (the classic
# builder keys a COPY by the content of what it copies), so a bump downloads and installs one
# group, and the other groups' layers stay the same. A dependency shared by two groups would
# have to be installed twice, so it fails the split. The lock files themselves name every
# version, so they change with every bump and get their own small layer, with the commands'
# links into /usr/local/bin; every command must be a bin of a package in the lock, and no bin
# may come from two groups (node_modules/.bin would keep the later layer's).
# The split is template/install-plan.js, a program of its own so it can be read (and run on a
# checkout: `AGENT_COMMANDS=... node template/install-plan.js template OUT GROUP=PACKAGE...`);
# it is copied into this builder stage only, so the image holds its output, not the program.
FROM npm AS install-plan
COPY template/install-plan.js /tmp/install-plan.js
COPY template/package.json template/package-lock.json /tmp/lock/
RUN set -eu; \
    node /tmp/install-plan.js /tmp/lock /plan \
        claude-code=@anthropic-ai/claude-code codex=@openai/codex opencode=opencode-ai; \
    lock=/staging/lock; \
    mkdir -p "$lock/opt/coding-agents" "$lock/usr/local/bin"; \
    cp /tmp/lock/package.json /tmp/lock/package-lock.json "$lock/opt/coding-agents/"; \
    for command in $AGENT_COMMANDS; do \
        ln -s "/opt/coding-agents/node_modules/.bin/$command" "$lock/usr/local/bin/$command"; \
    done

FROM npm AS claude-code
COPY --from=install-plan /plan/claude-code/ ./
RUN install-group claude-code

FROM npm AS codex
COPY --from=install-plan /plan/codex/ ./
RUN install-group codex

FROM npm AS opencode
COPY --from=install-plan /plan/opencode/ ./
RUN install-group opencode

FROM npm AS rest
COPY --from=install-plan /plan/rest/ ./
RUN install-group rest

# ---------------------------------------------------------------------------------------------
# The system: the base, Debian's packages and the image's settings. It comes after the builder
# stages on purpose: `cargo xtask build` asks the engine for this stage, and the classic builder
# then builds every stage above it in the same build (and none below).
FROM ${BASE_IMAGE} AS system

# Debian first, with no argument in scope that changes when CLI versions change: in the classic
# builder every declared ARG is part of a RUN's cache key, so a version bump must not re-run
# this layer. The package lists and apt's caches are removed in the same RUN (a later RUN could
# not shrink this layer).
# - chromium + chromium-sandbox: the shared browser, keeping its process sandbox for the
#   `sandbox-browser` user; fonts-liberation so pages render text with metric-compatible fonts.
# - tigervnc-standalone-server + openbox: the on-demand desktop a viewer connects to.
# - bubblewrap: Codex's sandbox helper (Codex warns without it).
# - git, openssh-client, ca-certificates, curl, procps, less: what coding agents call routinely.
# - dbus-x11: satisfies the session-bus dependency of the GTK stack with `dbus-launch`, which
#   works in a container without systemd; apt would otherwise choose dbus-user-session and pull
#   in systemd, which never runs here.
# Documentation, man pages and message translations are not unpacked (copyright files are
# kept): 120 MB nobody reads in a sandbox. Nor is Chromium's Vulkan validation layer (23 MB), a
# graphics-driver debugging aid that Chromium loads only when asked to validate Vulkan calls. The dpkg filter is removed again at the end, so
# packages an agent installs later behave as on any Debian system.
# Reproducible: the same package set gives the same layer on any machine and any day.
# SOURCE_DATE_EPOCH (a constant from the manifest, so the layer cache holds) makes useradd write
# it into /etc/shadow instead of the build's day. Three files differ on every run although the
# packages are the same, so they go or get a fixed value: fontconfig's caches record directory
# times (and are stale anyway once `build` clamps the layer's times; fontconfig reads the fonts
# without them), ldconfig's aux-cache records inodes, and dbus's postinst draws a random
# machine id. `dbus-launch` needs one; a baked-in id is shared by every sandbox of a release
# anyway, so a fixed one changes nothing for them.
ARG SOURCE_DATE_EPOCH
RUN set -eux; \
    [ -n "${SOURCE_DATE_EPOCH:-}" ] || { echo "build argument SOURCE_DATE_EPOCH is required" >&2; exit 1; }; \
    printf '%s\n' \
        'path-exclude=/usr/share/doc/*' \
        'path-include=/usr/share/doc/*/copyright' \
        'path-exclude=/usr/share/man/*' \
        'path-exclude=/usr/share/info/*' \
        'path-exclude=/usr/share/locale/*' \
        'path-include=/usr/share/locale/locale.alias' \
        'path-exclude=/usr/share/lintian/*' \
        'path-exclude=/usr/lib/chromium/libVkLayer_khronos_validation.so' \
        > /etc/dpkg/dpkg.cfg.d/zz-template-slim; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        bubblewrap \
        ca-certificates \
        chromium \
        chromium-sandbox \
        curl \
        dbus-x11 \
        fonts-liberation \
        git \
        less \
        openbox \
        openssh-client \
        procps \
        tigervnc-standalone-server; \
    apt-get clean; \
    rm -f /etc/dpkg/dpkg.cfg.d/zz-template-slim; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/cache/debconf/*-old \
        /var/log/apt /var/log/dpkg.log /var/log/alternatives.log; \
    rm -rf /var/cache/fontconfig/* /var/cache/ldconfig/aux-cache; \
    printf '%s\n' 5c1e7d0b2a9f4e6d8c3b1a0f9e8d7c6b > /var/lib/dbus/machine-id; \
    useradd --create-home --user-group --shell /bin/bash sandbox-browser; \
    mkdir -p /workspace

# The shared browser's launcher (/usr/local/bin/shared-browser), for an application to call on
# demand; nothing runs it at claim time. `start` brings up Xtigervnc (loopback only), openbox
# and headed Chromium with its process sandbox as sandbox-browser on a persistent profile, and
# prints the CDP endpoint; it first clears a profile lock left by another host name (a resume
# elsewhere), which would otherwise make Chromium refuse the profile. `stop` and `status` too.
# Chromium's sandbox needs the template's seccomp profile (template/manifest.yaml `runtime`).
RUN set -eu; \
    printf '%s\n' \
        '#!/bin/bash' \
        '# shared-browser: the shared browser of the coding-agent template, started on demand by an application (nothing' \
        '# starts it at claim time). `start` brings up the desktop (Xtigervnc on 127.0.0.1:5901, openbox)' \
        '# and headed Chromium with its process sandbox, all as sandbox-browser, on the persistent profile' \
        '# SHARED_BROWSER_PROFILE, and prints the CDP endpoint (loopback only; never publish it). A' \
        '# profile lock left by another host name (a resume on a new host) is cleared first. `stop` ends' \
        '# all three; `status` tells whether they run. The sandbox needs the seccomp profile of the template' \
        '# (template/seccomp/shared-browser.json): under the default of Docker Chromium cannot start.' \
        'set -eu' \
        'user=sandbox-browser' \
        'home=/home/$user' \
        'display="${SHARED_BROWSER_DISPLAY:-:1}"' \
        'vnc_port="${SHARED_BROWSER_VNC_PORT:-5901}"' \
        'cdp_port="${SHARED_BROWSER_CDP_PORT:-9222}"' \
        'geometry="${SHARED_BROWSER_GEOMETRY:-1280x800}"' \
        'profile="${SHARED_BROWSER_PROFILE:-$home/.config/shared-browser}"' \
        'timeout="${SHARED_BROWSER_TIMEOUT:-60}"' \
        'run=/tmp/shared-browser' \
        'endpoint="http://127.0.0.1:$cdp_port"' \
        'say() { echo "shared-browser: $*" >&2; }' \
        'as_user() {' \
        '    if [ "$(id -u)" = 0 ]; then' \
        '        setpriv --reuid="$user" --regid="$user" --init-groups \' \
        '            env HOME="$home" USER="$user" LOGNAME="$user" "$@"' \
        '    else' \
        '        env HOME="$home" "$@"' \
        '    fi' \
        '}' \
        '# Starts NAME in the background as the browser user, logging to $run/NAME.log; $! is the' \
        '# process itself (setpriv and env exec it), so its pid file names what `stop` must end.' \
        'spawn() {' \
        '    name="$1"' \
        '    shift' \
        '    if [ "$(id -u)" = 0 ]; then' \
        '        setpriv --reuid="$user" --regid="$user" --init-groups \' \
        '            env HOME="$home" USER="$user" LOGNAME="$user" "$@" </dev/null >"$run/$name.log" 2>&1 &' \
        '    else' \
        '        env HOME="$home" "$@" </dev/null >"$run/$name.log" 2>&1 &' \
        '    fi' \
        '    echo $! >"$run/$name.pid"' \
        '}' \
        'pid_of() { cat "$run/$1.pid" 2>/dev/null || true; }' \
        'alive() { pid="$(pid_of "$1")"; [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }' \
        'cdp_up() { curl --silent --fail --max-time 2 "$endpoint/json/version" >/dev/null 2>&1; }' \
        'log_tail() { say "$1 log ($run/$1.log):"; tail -n 20 "$run/$1.log" >&2 || true; }' \
        'clear_stale_lock() {' \
        '    [ -L "$profile/SingletonLock" ] || return 0' \
        '    owner="$(readlink "$profile/SingletonLock")"' \
        '    host="${owner%-*}"' \
        '    pid="${owner##*-}"' \
        '    if [ "$host" = "$(uname -n)" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = chromium ]; then' \
        '        say "profile $profile is in use by Chromium pid $pid"' \
        '        exit 1' \
        '    fi' \
        '    say "clearing the stale profile lock of $owner (this host is $(uname -n))"' \
        '    rm -f "$profile/SingletonLock" "$profile/SingletonSocket" "$profile/SingletonCookie"' \
        '}' \
        'start() {' \
        '    if alive chromium && cdp_up; then echo "$endpoint"; return 0; fi' \
        '    if [ "$(id -u)" = 0 ]; then' \
        '        install -d -o "$user" -g "$user" -m 0700 "$run"' \
        '    else' \
        '        [ -d "$run" ] || mkdir -m 0700 "$run"' \
        '    fi' \
        '    number="${display#:}"' \
        '    if ! alive xvnc; then' \
        '        lock="/tmp/.X$number-lock"' \
        '        if [ -e "$lock" ] && ! kill -0 "$(tr -d " " <"$lock")" 2>/dev/null; then' \
        '            rm -f "$lock" "/tmp/.X11-unix/X$number"' \
        '        fi' \
        '        spawn xvnc Xtigervnc "$display" -SecurityTypes None -localhost -rfbport "$vnc_port" \' \
        '            -geometry "$geometry" -depth 24' \
        '        for _ in $(seq 1 100); do [ -S "/tmp/.X11-unix/X$number" ] && break; sleep 0.1; done' \
        '        [ -S "/tmp/.X11-unix/X$number" ] || { say "Xtigervnc made no display $display"; log_tail xvnc; exit 1; }' \
        '    fi' \
        '    if ! alive openbox; then' \
        '        spawn openbox env DISPLAY="$display" openbox --sm-disable' \
        '    fi' \
        '    as_user mkdir -p "$profile"' \
        '    clear_stale_lock' \
        '    spawn chromium env DISPLAY="$display" chromium --user-data-dir="$profile" \' \
        '        --remote-debugging-address=127.0.0.1 --remote-debugging-port="$cdp_port" \' \
        '        --no-first-run --no-default-browser-check --password-store=basic \' \
        '        --window-position=0,0 --window-size="${geometry/x/,}" --start-maximized \' \
        '        about:blank' \
        '    for _ in $(seq 1 $((timeout * 5))); do' \
        '        cdp_up && { say "desktop $display on vnc 127.0.0.1:$vnc_port; profile $profile"; echo "$endpoint"; return 0; }' \
        '        alive chromium || { say "Chromium exited before its CDP endpoint came up"; log_tail chromium; exit 1; }' \
        '        sleep 0.2' \
        '    done' \
        '    say "no CDP endpoint at $endpoint within $timeout s"' \
        '    log_tail chromium' \
        '    exit 1' \
        '}' \
        'stop() {' \
        '    for name in chromium openbox xvnc; do' \
        '        if alive "$name"; then' \
        '            pid="$(pid_of "$name")"' \
        '            kill -TERM "$pid" 2>/dev/null || true' \
        '            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done' \
        '            kill -KILL "$pid" 2>/dev/null || true' \
        '        fi' \
        '        rm -f "$run/$name.pid"' \
        '    done' \
        '}' \
        'status() {' \
        '    state=0' \
        '    for name in xvnc openbox chromium; do' \
        '        if alive "$name"; then echo "$name running (pid $(pid_of "$name"))"; else echo "$name stopped"; state=3; fi' \
        '    done' \
        '    if cdp_up; then echo "cdp $endpoint"; else state=3; fi' \
        '    return "$state"' \
        '}' \
        'case "${1:-}" in' \
        '    start) start ;;' \
        '    stop) stop ;;' \
        '    status) status ;;' \
        '    *) echo "usage: shared-browser start|stop|status" >&2; exit 2 ;;' \
        'esac' \
        > /usr/local/bin/shared-browser; \
    chmod 0755 /usr/local/bin/shared-browser

ENV HOME=/workspace \
    DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    DISABLE_TELEMETRY=1 \
    OPENCODE_DISABLE_AUTOUPDATE=1 \
    PI_SKIP_VERSION_CHECK=1 \
    PI_TELEMETRY=0 \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NO_UPDATE_NOTIFIER=1 \
    NPM_CONFIG_AUDIT=false \
    NPM_CONFIG_FUND=false \
    PLAYWRIGHT_MCP_BROWSER=chromium \
    PLAYWRIGHT_MCP_EXECUTABLE_PATH=/usr/bin/chromium \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
WORKDIR /workspace
# No entrypoint or command on purpose: Sandbox0 injects its own process manager. Both are
# cleared explicitly because a production BASE_IMAGE may define them and they would be inherited.
ENTRYPOINT []
CMD []

# ---------------------------------------------------------------------------------------------
# The image: the system, then one layer per builder stage's /staging/<stage>/ tree, then the
# provenance labels. A layer's digest depends on its files alone, so a bump publishes that
# group's layer and the lock files' layer, and registries store and nodes pull only those.
# `docker build` of this file gives this image. `cargo xtask build` gives the same files without
# running these steps: it reads them (only `COPY --from=STAGE /staging/DIR/ /`, `ARG` and `LABEL`
# may appear here) and assembles each layer from its stage's tree (ARCHITECTURE.md), so one
# changed stage changes one layer, and the later ones are not copied again.
FROM system
COPY --from=node /staging/node/ /
COPY --from=claude-code /staging/claude-code/ /
COPY --from=codex /staging/codex/ /
COPY --from=opencode /staging/opencode/ /
COPY --from=rest /staging/rest/ /
COPY --from=install-plan /staging/lock/ /

# Provenance. The values come from the lockfile and the inventory through `cargo xtask build`.
ARG LOCKFILE_SHA256
ARG PACKAGE_VERSIONS
ARG NODE_VERSION
LABEL org.opencontainers.image.title="coding-agent" \
      org.opencontainers.image.description="Sandbox0 coding-agent template: Codex, Claude Code, OpenCode, Pi, Playwright CLI, Chromium, TigerVNC, Openbox" \
      org.sandbox0.coding-agent.lockfile.sha256="${LOCKFILE_SHA256}" \
      org.sandbox0.coding-agent.packages="${PACKAGE_VERSIONS}" \
      org.sandbox0.coding-agent.node.version="${NODE_VERSION}"
