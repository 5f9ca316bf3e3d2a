# shellcheck shell=bash
# The on-demand desktop as the browser user: Xtigervnc answers with the RFB banner and openbox keeps running against it.
set -u
export HOME=/home/@BROWSER_USER@
Xtigervnc :1 -SecurityTypes None -localhost -rfbport 5901 -geometry 1280x800 -depth 24 >/tmp/xvnc.log 2>&1 &
xvnc=$!
for _ in $(seq 1 150); do [ -S /tmp/.X11-unix/X1 ] && break; sleep 0.2; done
if [ ! -S /tmp/.X11-unix/X1 ]; then echo "Xtigervnc made no display socket"; cat /tmp/xvnc.log; exit 1; fi
DISPLAY=:1 openbox --sm-disable >/tmp/openbox.log 2>&1 &
openbox=$!
sleep 3
kill -0 "$xvnc" 2>/dev/null || { echo "Xtigervnc exited"; cat /tmp/xvnc.log; exit 1; }
kill -0 "$openbox" 2>/dev/null || { echo "openbox exited"; cat /tmp/openbox.log; exit 1; }
exec 3<>/dev/tcp/127.0.0.1/5901
head -c 12 <&3
echo
echo "Xtigervnc pid $xvnc serving; openbox running as pid $openbox, user $(id -un)"
