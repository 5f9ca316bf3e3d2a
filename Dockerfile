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
    mkdir -p /staging/node/lib/node_modules/npm /tmp/node-package; \
    tar -xzf node.tgz -C /tmp/node-package --strip-components=1; \
    tar -xzf npm.tgz -C /staging/node/lib/node_modules/npm --strip-components=1; \
    mkdir -p /staging/node/bin; \
    install -m 0755 /tmp/node-package/bin/node /staging/node/bin/node; \
    if [ -d /tmp/node-package/include ]; then cp -a /tmp/node-package/include /staging/node/; fi; \
    case "$(dpkg --print-architecture)" in \
        amd64) openssl_arch=linux-x86_64 ;; \
        arm64) openssl_arch=linux-aarch64 ;; \
        *) echo "unsupported architecture $(dpkg --print-architecture)" >&2; exit 1 ;; \
    esac; \
    archs=/staging/node/include/node/openssl/archs; \
    if [ -d "$archs" ]; then \
        [ -d "$archs/$openssl_arch" ] || { echo "Node headers lack OpenSSL's $openssl_arch configuration" >&2; exit 1; }; \
        find "$archs" -mindepth 1 -maxdepth 1 ! -name "$openssl_arch" -exec rm -rf {} +; \
    fi; \
    ln -s ../lib/node_modules/npm/bin/npm-cli.js /staging/node/bin/npm; \
    ln -s ../lib/node_modules/npm/bin/npx-cli.js /staging/node/bin/npx; \
    rm -rf /tmp/node.tgz /tmp/npm.tgz /tmp/node-package; \
    version="$(/staging/node/bin/node --version)"; \
    version="${version#v}"; \
    major="${version%%.*}"; \
    if [ "$major" != "$NODE_MAJOR" ]; then \
        echo "Node $version is not on the $NODE_MAJOR.x line the template requires" >&2; exit 1; \
    fi; \
    lowest="$(printf '%s\n%s\n' "$NODE_MINIMUM" "$version" | sort -V | head -n1)"; \
    if [ "$lowest" != "$NODE_MINIMUM" ]; then \
        echo "Node $version is older than $NODE_MINIMUM (Pi needs it)" >&2; exit 1; \
    fi; \
    PATH="/staging/node/bin:$PATH" npm --version; \
    echo "build: Node $version and npm verified"

# ---------------------------------------------------------------------------------------------
# Builder: the agents, exactly as locked, with the pinned npm and an explicit configuration
# (the host's ~/.npmrc never applies here).
FROM fetch-tools AS agents
COPY --from=node /staging/node/ /usr/local/
WORKDIR /opt/coding-agents
COPY template/package.json template/package-lock.json ./
ARG INSTALL_SCRIPTS_ALLOWED
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
RUN set -eu; \
    printf '%s\n' \
        'registry=https://registry.npmjs.org/' \
        'fund=false' 'audit=false' 'update-notifier=false' \
        'progress=false' 'loglevel=warn' \
        > /tmp/build-npmrc; \
    [ -n "${INSTALL_SCRIPTS_ALLOWED:-}" ] || { echo "build argument INSTALL_SCRIPTS_ALLOWED is required" >&2; exit 1; }; \
    NODE_EXTRA_CA_CERTS=/tmp/build-ca/bundle.pem \
    npm ci --omit=dev --ignore-scripts --userconfig /tmp/build-npmrc --cache /tmp/npm-cache; \
    NODE_EXTRA_CA_CERTS=/tmp/build-ca/bundle.pem \
    npm rebuild $INSTALL_SCRIPTS_ALLOWED --userconfig /tmp/build-npmrc --cache /tmp/npm-cache; \
    baseline=node_modules/opencode-linux-x64-baseline/bin/opencode; \
    if [ -e "$baseline" ]; then \
        ln -f "$baseline" node_modules/opencode-ai/bin/opencode.exe; \
        rm -rf node_modules/opencode-linux-x64; \
        echo "build: opencode uses the x64 baseline build"; \
    fi; \
    node_modules/opencode-ai/bin/opencode.exe --version >/dev/null; \
    for dir in node_modules/*-musl node_modules/*/*-musl; do \
        if [ -e "$dir" ]; then echo "build: pruning $dir"; rm -rf "$dir"; fi; \
    done; \
    find node_modules -type f -name '*.map' -delete; \
    rm -rf /tmp/npm-cache /tmp/build-npmrc /root/.npm; \
    stage() { \
        dest="/staging/$1/opt/coding-agents/node_modules"; shift; \
        mkdir -p "$dest"; \
        for package in "$@"; do \
            [ -e "node_modules/$package" ] || continue; \
            mkdir -p "$dest/$(dirname "$package")"; \
            mv "node_modules/$package" "$dest/$package"; \
        done; \
    }; \
    cd node_modules; \
    claude=$(ls -d @anthropic-ai/claude-code*); \
    codex=$(ls -d @openai/codex*); \
    opencode=$(ls -d opencode-ai opencode-linux-*); \
    cd ..; \
    stage claude $claude; \
    stage codex $codex; \
    stage opencode $opencode; \
    lock=/staging/lock/opt/coding-agents; \
    mkdir -p "$lock/node_modules" /staging/rest/opt; \
    mv package.json package-lock.json "$lock/"; \
    mv node_modules/.package-lock.json "$lock/node_modules/"; \
    mv /opt/coding-agents /staging/rest/opt/; \
    mkdir -p /opt/coding-agents

# The install is then split into five directories, one final-image layer each: the three
# large native CLIs (Claude Code, Codex, OpenCode, with the platform packages their launchers
# hard-link, which must stay in one layer), the rest of node_modules, and the lock files, which
# name every version and so change with every bump (a few hundred KB). `build` makes each layer
# canonical, so a layer's digest depends on its files alone: a version bump publishes that
# package's layer and the lock files' layer, and registries store and nodes pull only those.

# ---------------------------------------------------------------------------------------------
# The image.
FROM ${BASE_IMAGE}

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

COPY --from=node /staging/node/ /usr/local/
COPY --from=agents /staging/claude/ /
COPY --from=agents /staging/codex/ /
COPY --from=agents /staging/opencode/ /
COPY --from=agents /staging/rest/ /
COPY --from=agents /staging/lock/ /

# Space-separated executables to link into /usr/local/bin (the manifest's `command`s).
ARG AGENT_COMMANDS
# The startup check: every linked CLI must start and print its version, or the build fails.
# It runs with a throwaway HOME so no CLI state lands in the image.
RUN set -eu; \
    [ -n "${AGENT_COMMANDS:-}" ] || { echo "build argument AGENT_COMMANDS is required" >&2; exit 1; }; \
    check_home="$(mktemp -d)"; \
    for command in $AGENT_COMMANDS; do \
        target="/opt/coding-agents/node_modules/.bin/$command"; \
        [ -e "$target" ] || { echo "$command: $target does not exist after npm ci" >&2; exit 1; }; \
        ln -sf "$target" "/usr/local/bin/$command"; \
        printf 'build: %s --version: ' "$command"; \
        HOME="$check_home" "$command" --version; \
    done; \
    rm -rf "$check_home" /tmp/* /root/.npm /root/.cache

ENV HOME=/workspace \
    DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    DISABLE_TELEMETRY=1 \
    OPENCODE_DISABLE_AUTOUPDATE=1 \
    PI_SKIP_VERSION_CHECK=1 \
    PI_TELEMETRY=0 \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
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

# Provenance, last so it never invalidates a layer above. The values come from the lockfile and
# the inventory through `cargo xtask build`.
ARG LOCKFILE_SHA256
ARG PACKAGE_VERSIONS
ARG NODE_VERSION
LABEL org.opencontainers.image.title="coding-agent" \
      org.opencontainers.image.description="Sandbox0 coding-agent template: Codex, Claude Code, OpenCode, Pi, Playwright CLI, Chromium, TigerVNC, Openbox" \
      org.sandbox0.coding-agent.lockfile.sha256="${LOCKFILE_SHA256}" \
      org.sandbox0.coding-agent.packages="${PACKAGE_VERSIONS}" \
      org.sandbox0.coding-agent.node.version="${NODE_VERSION}"
