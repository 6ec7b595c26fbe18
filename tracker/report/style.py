"""The report's inline style sheet."""

STYLE = """
:root{--ink:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#fff;--panel:#f6f8fa;--pass:#2da44e;--fail:#cf222e;
--skip:#8c959f;--flaky:#e16f24;--untested:#eaeef2;--revert:#8250df;--reland:#0969da;--hl:#fff8c5}
*{box-sizing:border-box}
body{margin:0;padding:0 24px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif;color:var(--ink);background:var(--bg)}
code,.sha,.date,.pr,.num{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
a{color:var(--reland);text-decoration:none}a:hover{text-decoration:underline}
h1{font-size:22px;margin:0}h2{font-size:18px;margin:32px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:20px 0 4px}.brand{color:var(--muted);font-weight:400}
header.top{padding:18px 0 10px;border-bottom:1px solid var(--line)}
.meta,.span,.hint{margin:4px 0;color:var(--muted)}
nav{margin-top:8px;display:flex;gap:14px;flex-wrap:wrap}
.muted{color:var(--muted)}
.probe-name{font-family:ui-monospace,"SFMono-Regular","DejaVu Sans Mono",monospace;font-size:13px;font-weight:600}
table.list{border-collapse:collapse;margin:6px 0 10px}
table.list th,table.list td{border-bottom:1px solid var(--line);padding:4px 10px 4px 0;text-align:left;vertical-align:top}
table.list th{font-weight:600;color:var(--muted);font-size:12px;white-space:nowrap}
table.list td.date,table.list td.nowrap,table.list td.author{white-space:nowrap}
table.list.wide{width:100%}
td.num{text-align:right}
.story{max-width:110ch}
.pill{display:inline-block;padding:0 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff;white-space:nowrap}
.pill.s-untested{color:var(--ink)}
.s-pass{background:var(--pass)}.s-fail{background:var(--fail)}.s-skip{background:var(--skip)}
.s-flaky{background:var(--flaky)}.s-untested{background:var(--untested)}
.f-pass{fill:var(--pass)}.f-fail{fill:var(--fail)}.f-skip{fill:var(--skip)}.f-flaky{fill:var(--flaky)}.f-untested{fill:var(--untested)}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center;margin:6px 0 10px;font-size:12px}
.key{display:inline-flex;gap:6px;align-items:center}
.sw{display:inline-block;width:18px;height:16px;color:#fff;font-size:11px;line-height:16px;text-align:center}
.ov{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;align-items:center;margin-top:8px}
.ov-label{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12px;text-align:right;white-space:nowrap}
svg.strip{width:100%;height:22px;display:block;border-radius:3px}
.arcs-wrap{position:relative}
svg.arcs{width:100%;height:26px;display:block;position:absolute;top:0}
.arc-label{position:absolute;transform:translateX(-50%);font-size:11px;font-weight:600;line-height:16px;padding:0 5px;border-radius:3px;color:#fff;white-space:nowrap}
.arc-label.revert{background:var(--revert)}.arc-label.reland{background:var(--reland)}
svg .tick{stroke:var(--ink);stroke-width:2;vector-effect:non-scaling-stroke;opacity:.55}
svg .arc{fill:none;stroke-width:2;vector-effect:non-scaling-stroke}
svg .arc.revert{stroke:var(--revert)}svg .arc.reland{stroke:var(--reland);stroke-dasharray:5 3}
.axis{display:flex;justify-content:space-between;color:var(--muted);font-size:12px}
.grid-wrap{max-height:78vh;overflow:auto;border:1px solid var(--line);border-radius:6px}
table.grid{border-collapse:separate;border-spacing:0;font-size:12px;width:max-content;min-width:100%}
table.grid thead th{position:sticky;top:0;z-index:2;background:var(--panel);border-bottom:1px solid var(--line);
text-align:left;vertical-align:bottom;padding:4px 8px;font-weight:600;color:var(--muted)}
table.grid th.probe{padding:6px 0;width:20px;text-align:center}
table.grid th.probe span{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-family:ui-monospace,"DejaVu Sans Mono",monospace;color:var(--ink)}
table.grid td{padding:0 8px;height:18px;white-space:nowrap;border-bottom:1px solid #f0f2f4}
table.grid td.c{padding:0;width:20px;min-width:20px;text-align:center;color:#fff;font-size:11px;border-left:2px solid var(--bg);border-right:2px solid var(--bg);border-bottom:0}
table.grid td.sha{position:sticky;left:0;z-index:1;background:var(--bg);border-left:4px solid transparent}
table.grid thead th.sha{z-index:3;background:var(--panel)}
table.grid tr.k-regression td.sha{border-left-color:var(--fail)}table.grid tr.k-fix td.sha{border-left-color:var(--pass)}
table.grid tr.k-fix.k-regression td.sha{border-left-color:var(--flaky)}
table.grid tr.k-regression td,table.grid tr.k-fix td{border-bottom-color:var(--line)}
td.t-regression,td.t-fix,.sw.t-regression,.sw.t-fix{box-shadow:inset 0 0 0 2px var(--ink);font-weight:700}
td.t-fix::after,.sw.t-fix::after{content:"\\25b2";color:#fff}
td.t-candidate,.sw.t-candidate{outline:2px dashed var(--ink);outline-offset:-2px}
td.subj{max-width:56ch;overflow:hidden;text-overflow:ellipsis}
td.author{color:var(--muted);max-width:18ch;overflow:hidden;text-overflow:ellipsis}td.date,td.pr{color:var(--muted)}
td.events{padding:0 4px}
.ev{display:inline-block;margin-right:4px;padding:0 6px;border-radius:3px;font-size:11px;line-height:16px;font-weight:600;white-space:nowrap;border:1px solid}
.ev.regression{color:var(--fail);border-color:var(--fail)}.ev.fix{color:var(--pass);border-color:var(--pass)}
.ev.revert{color:#fff;background:var(--revert);border-color:var(--revert)}.ev.reland{color:#fff;background:var(--reland);border-color:var(--reland)}
.ev.back{background:none}.ev.revert.back{color:var(--revert)}.ev.reland.back{color:var(--reland)}
.ev code{font-size:11px}
table.grid tr{scroll-margin-top:11rem}
table.grid tr:target td:not(.c){background:var(--hl)}
table.grid tbody tr:hover td:not(.c){background:var(--panel)}
details.bisect{border:1px solid var(--line);border-radius:6px;padding:6px 12px;margin:8px 0}
details.bisect summary{cursor:pointer}
footer{margin-top:40px;color:var(--muted);font-size:12px}
"""


