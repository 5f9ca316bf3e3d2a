# shellcheck shell=bash
# One harness, one real turn and a resume, against a fake model on loopback: fake-model.js and harness-turns.js are inlined as node -e programs. Runs on a writable rootfs, as a sandbox has one, with a /workspace volume and a tmpfs /tmp; the driver lists every file the harness changed, which the smoke test judges.
set -euo pipefail
harness=@HARNESS@
work=@OWN_DIR@
mkdir -p "$work"
: > "$work/requests.log"

node -e '
@FAKE_MODEL_JS@' > "$work/port" &
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
base="http://127.0.0.1:$(cat "$work/port")"

# Each CLI pointed at the fake model through its own documented setting; the one key any of
# them insists on is a made-up loopback value, not a credential.
case "$harness" in
  codex)
    # Codex's docs/config.md (github.com/openai/codex): a `model_providers` entry with
    # `base_url` and `wire_api = "responses"`, chosen by `model_provider`; without `env_key` no
    # key is sent. The names are those of the installed binary (@openai/codex-linux-x64
    # 0.171.0, vendor/x86_64-unknown-linux-musl/bin/codex), in $CODEX_HOME, ~/.codex by default.
    mkdir -p "$HOME/.codex"
    cat > "$HOME/.codex/config.toml" << EOF
model = "fake-model"
model_provider = "fake"
[model_providers.fake]
name = "fake model on loopback"
base_url = "$base/v1"
wire_api = "responses"
EOF
    ;;
  claude-code)
    # Claude Code's documented environment variables (its settings documentation), both read
    # by the installed binary (@anthropic-ai/claude-code-linux-x64 2.1.332, claude): the
    # Messages API at ANTHROPIC_BASE_URL, and no traffic but the model's.
    export ANTHROPIC_BASE_URL="$base"
    export ANTHROPIC_API_KEY="fake-key-for-loopback"
    export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
    ;;
  opencode)
    # opencode.ai/docs/providers, "Custom provider": an @ai-sdk/openai-compatible provider with
    # `options.baseURL`, chosen by `model` (and `small_model`, which names sessions), in the
    # global config ~/.config/opencode. OpenCode 1.18.18 bundles that provider package
    # (opencode-linux-x64-baseline/bin/opencode), so nothing is fetched from npm.
    mkdir -p "$HOME/.config/opencode"
    cat > "$HOME/.config/opencode/opencode.json" << EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "model": "fake/fake-model",
  "small_model": "fake/fake-model",
  "share": "disabled",
  "autoupdate": false,
  "provider": {
    "fake": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "fake model on loopback",
      "options": { "baseURL": "$base/v1", "apiKey": "fake-key-for-loopback" },
      "models": { "fake-model": { "name": "fake model" } }
    }
  }
}
EOF
    ;;
  pi)
    # pi-coding-agent 1.6.0 docs/models.md "Configure a compatible endpoint" and
    # docs/settings.md (defaultProvider, defaultModel), in the agent directory ~/.pi/agent.
    mkdir -p "$HOME/.pi/agent"
    cat > "$HOME/.pi/agent/models.json" << EOF
{ "providers": { "fake": { "baseUrl": "$base/v1", "api": "openai-completions",
  "apiKey": "fake-key-for-loopback", "models": [ { "id": "fake-model" } ] } } }
EOF
    cat > "$HOME/.pi/agent/settings.json" << EOF
{ "defaultProvider": "fake", "defaultModel": "fake-model" }
EOF
    ;;
esac

node -e '
@DRIVER_JS@' | tee "$work/driver.out"
echo "fake model requests: $(sed -n "s/.*\"path\":\"\([^\"]*\)\".*/\1/p" "$work/requests.log" | sort | uniq -c | tr -s " \n" " ")"
grep -q "\"turn\":2,\"carried\":true" "$work/requests.log"
echo "the fake model saw turn two carry turn one"

# The native state: under /workspace, named by the session id, and none of it in /tmp (the
# smoke test judges the driver's list of every file changed anywhere else).
id="$(grep -v "^@" "$work/driver.out" | sed -n "s/.* in session \(.*\)$/\1/p")"
state="$(grep -rlF -- "$id" "$HOME" || true)"
if [ -z "$state" ]; then
  echo "$harness: no file under $HOME names session $id" >&2
  exit 1
fi
elsewhere="$(find /tmp -path "$work" -prune -o -type f -print0 | xargs -0 -r grep -lF -- "$id" || true)"
if [ -n "$elsewhere" ]; then
  echo "$harness: session $id is also stored outside $HOME:" >&2
  echo "$elsewhere" >&2
  exit 1
fi
echo "session $id stored under $HOME only: $(echo "$state" | head -n 3 | tr "\n" " ")"
