# shellcheck shell=bash
# The shared browser as the seed describes it, started by the image's launcher in a container with the template's seccomp profile: headed Chromium as the browser user with its sandbox, CDP on loopback only, playwright-cli attached to it driving a page served in the container, and a viewer's RFB session through a ws bridge whose framebuffer shows that page. colour-page.js and rfb-viewer.js are inlined as node -e programs.
set -eu
cd "$(mktemp -d)"
node -e '
@COLOUR_PAGE_JS@' > port &
for _ in $(seq 1 100); do [ -s port ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat port)/"
cdp="$(@LAUNCHER@ start)"
[ "$cdp" = "http://127.0.0.1:@CDP_PORT@" ] || { echo "the launcher printed $cdp, not the loopback CDP endpoint"; exit 1; }
echo "launcher: CDP endpoint $cdp"

# Every Chromium process: the browser user, headed, sandboxed.
browser_uid="$(id -u @BROWSER_USER@)"
count=0
bad=""
for proc in /proc/[0-9]*; do
    args="$(tr "\0" " " <"$proc/cmdline" 2>/dev/null || true)"
    case "$args" in /usr/lib/chromium/chromium*) ;; *) continue ;; esac
    count=$((count + 1))
    uid="$(awk "/^Uid:/ { print \$2 }" "$proc/status")"
    [ "$uid" = "$browser_uid" ] || bad="$bad; pid ${proc#/proc/} runs as uid $uid"
    case "$args" in *--no-sandbox*|*--headless*) bad="$bad; pid ${proc#/proc/}: $args" ;; esac
done
[ -z "$bad" ] || { echo "chromium processes break the promise:$bad"; exit 1; }
# The browser process is the one the launcher started (the Debian wrapper execs it).
browser_pid="$(cat /tmp/shared-browser/chromium.pid)"
case "$(tr "\0" " " <"/proc/$browser_pid/cmdline" 2>/dev/null || true)" in
    /usr/lib/chromium/chromium*--type=*|"") echo "pid $browser_pid is not the chromium browser process"; exit 1 ;;
    /usr/lib/chromium/chromium*) ;;
    *) echo "pid $browser_pid is not the chromium browser process"; exit 1 ;;
esac
echo "chromium: $count processes, all uid $browser_uid (@BROWSER_USER@), none --headless or --no-sandbox"

# CDP and VNC listen on loopback only (/proc/net/tcp: state 0A is LISTEN, 0100007F is 127.0.0.1).
listeners() {
    port="$(printf "%04X" "$1")"
    awk -v port="$port" "\$4 == \"0A\" && \$2 ~ (\":\" port \"\$\") { print \$2 }" /proc/net/tcp /proc/net/tcp6
}
for service in cdp:@CDP_PORT@ vnc:@VNC_PORT@; do
    found="$(listeners "${service#*:}")"
    [ -n "$found" ] || { echo "nothing listens on port ${service#*:}"; exit 1; }
    for address in $found; do
        case "$address" in
            0100007F:*|00000000000000000000000001000000:*) ;;
            *) echo "${service%%:*} listens on $address, not loopback"; exit 1 ;;
        esac
    done
    echo "${service%%:*} listens on loopback only: $found"
done

# playwright-cli attached to that browser.
playwright-cli attach --cdp="$cdp"
playwright-cli goto chrome://sandbox
playwright-cli snapshot | grep -E "adequately sandboxed" || { echo "chrome://sandbox does not report the namespace sandbox"; playwright-cli snapshot; exit 1; }
playwright-cli goto "$url"
playwright-cli snapshot
curl --silent --fail "$cdp/json/list" | grep -F "\"url\": \"$url\"" && echo "the page is a target of the same browser"
# The page's renderer: in a PID namespace of its own, as the namespace sandbox puts it. Its
# /proc/PID/ns links need ptrace rights over a non-dumpable process, which the container has not;
# /proc/PID/status lists its pid in every nested PID namespace (NSpid) to anyone.
for proc in /proc/[0-9]*; do
    case "$(tr "\0" " " <"$proc/cmdline" 2>/dev/null || true)" in /usr/lib/chromium/chromium*--type=renderer*) ;; *) continue ;; esac
    nspid="$(awk "/^NSpid:/ { \$1 = \"\"; print }" "$proc/status" 2>/dev/null || true)"
    [ "$(echo "$nspid" | wc -w)" -ge 2 ] || continue
    echo "renderer pid ${proc#/proc/} runs in a PID namespace of its own (NSpid:$nspid)"
    break
done
# A viewer: RFB through a ws bridge, the framebuffer showing the page.
node -e '
@RFB_VIEWER_JS@'
@LAUNCHER@ stop
for _ in $(seq 1 50); do
    running="$(for proc in /proc/[0-9]*; do case "$(tr "\0" " " <"$proc/cmdline" 2>/dev/null || true)" in /usr/lib/chromium/chromium*) echo "${proc#/proc/}" ;; esac; done)"
    [ -n "$running" ] || break
    sleep 0.1
done
[ -z "$running" ] || { echo "chromium still runs after stop: $running"; exit 1; }
echo "launcher: stop ended every chromium process"
