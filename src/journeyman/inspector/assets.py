"""The report's stylesheet and script, inlined into every report (no network at view time).

The script only reads the page: it never builds markup from text (every session text is
already escaped in the HTML), it sets `textContent` and attributes. The page's Content
Security Policy allows exactly this script, by its hash.
"""

from __future__ import annotations

STYLE = """
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--muted:#667085;--line:#e3e6eb;
--ok:#127a3a;--ok-bg:#e3f5e9;--bad:#b42318;--bad-bg:#fde8e6;--warn:#9a5b00;--warn-bg:#fff2d6;
--accent:#3056d3;--code:#f1f3f6}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
color:var(--ink);background:var(--bg)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{margin:0;white-space:pre-wrap;word-break:break-word}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
nav{position:sticky;top:0;z-index:5;background:#1d2330;color:#fff;display:flex;gap:18px;
align-items:center;padding:8px 24px}
nav .brand{font-weight:700;margin-right:8px}nav a{color:#c9d3ff}
nav .sid{margin-left:auto;color:#aab3c5}
main{max-width:1180px;margin:0 auto;padding:18px 24px 60px}
section.panel{background:var(--card);border:1px solid var(--line);border-radius:10px;
padding:16px 20px;margin:0 0 18px}
h1{font-size:20px;margin:0 0 10px}h2{font-size:16px;margin:0 0 12px}
h2 .count{color:var(--muted);font-weight:400}
.task{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
background:var(--code);border-radius:8px;padding:10px 14px;
max-height:12em;overflow:auto}
.outcome{display:flex;gap:14px;align-items:flex-start;border-radius:8px;padding:12px 14px;
margin:14px 0}
.outcome .reason{font-size:20px;font-weight:700;white-space:nowrap}
.outcome.success{background:var(--ok-bg);color:var(--ok)}
.outcome.failure{background:var(--bad-bg);color:var(--bad)}
.outcome.capacity,.outcome.unfinished{background:var(--warn-bg);color:var(--warn)}
.outcome .final{color:var(--ink);flex:1}
.outcome pre{max-height:10em;overflow:auto;font:inherit;white-space:pre-wrap}
.outcome .check{font-size:12.5px;color:var(--muted);margin-top:4px}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(118px,1fr));gap:10px}
.stat{border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.stat .v{font-size:19px;font-weight:650}.stat .k{color:var(--muted);font-size:12px}
.stat .s{color:var(--muted);font-size:12px}
.meta{color:var(--muted);margin-top:12px;font-size:12.5px}
.meta span{margin-right:16px}
h2.sub{font-size:13px;margin:14px 0 4px}
ul.highlights{margin:0;padding-left:18px;font-size:13px}ul.highlights li{margin:2px 0}
.chart-block{margin:4px 0 14px}.chart-block h3{font-size:13px;margin:0 0 2px;font-weight:600}
.legend{font-size:12px;color:var(--muted);display:flex;gap:14px;flex-wrap:wrap;margin:2px 0 0 64px}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;
vertical-align:-1px}
svg.chart{width:100%;height:auto;display:block;cursor:crosshair}
svg.band{margin-top:2px}
.grid{stroke:#e7eaef;stroke-width:1;fill:none}
.axis{font-size:10.5px;fill:#7a8394}
.axis.right{text-anchor:start}
.bar-input,.lg-input{fill:#5b7cfa;background:#5b7cfa}
.bar-cache-read,.lg-cache-read{fill:#a9d8b8;background:#a9d8b8}
.bar-cache-write,.lg-cache-write{fill:#f5c07a;background:#f5c07a}
.bar-output,.lg-output{fill:#7c5cc4;background:#7c5cc4}
.bar-cost,.lg-cost{fill:#f08c6c;background:#f08c6c}
.line-cum{fill:none;stroke:#b42318;stroke-width:2}.lg-cum{background:#b42318}
.marker{stroke:#d97706;stroke-width:1.2;stroke-dasharray:4 3;fill:none}
.marker-tip,.lg-marker{fill:#d97706;background:#d97706}
.cursor{stroke:#1d2330;stroke-width:1;stroke-opacity:.45}
.ph-discover{fill:#cfe0ff}.ph-plan{fill:#e4d7ff}.ph-act{fill:#ffe2b8}.ph-verify{fill:#c9f0d6}
.ph-done{fill:#8fd6a5}.ph-fail{fill:#f6b3ab}
.band-label{font-size:11px;fill:#1d2330}
#tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;font-size:12px;
padding:6px 9px;border-radius:6px;white-space:pre;z-index:10;display:none}
.toolbar{display:flex;gap:10px;align-items:center;flex-wrap:wrap;margin-bottom:10px}
.toolbar input[type=search]{flex:1;min-width:200px;padding:6px 10px;border:1px solid var(--line);
border-radius:6px;font:inherit}
.toolbar button{font:inherit;padding:5px 10px;border:1px solid var(--line);border-radius:6px;
background:#fff;cursor:pointer}
.toolbar label{color:var(--muted);font-size:13px}
.shown{color:var(--muted);font-size:12.5px}
details.step{border:1px solid var(--line);border-left:4px solid #c7cdd8;border-radius:6px;
margin:0 0 6px;background:#fff;content-visibility:auto;contain-intrinsic-size:auto 36px}
details.change{content-visibility:auto;contain-intrinsic-size:auto 120px}
details.step.err{border-left-color:var(--bad)}
details.step.changed{border-left-color:var(--accent)}
details.step.err.changed{border-left-color:var(--bad)}
details.step>summary{list-style:none;cursor:pointer;display:flex;gap:8px;align-items:center;
padding:6px 10px;flex-wrap:wrap}
details.step>summary::-webkit-details-marker{display:none}
.no{font-weight:700;min-width:44px}
.chip{border-radius:10px;padding:1px 8px;font-size:12px;background:#eef1f6;white-space:nowrap}
.chip.tool{background:#e8edff;color:#23399a}
.chip.tool.bad{background:var(--bad-bg);color:var(--bad)}
.chip.tool.refused{background:var(--warn-bg);color:var(--warn)}
.chip.n-compaction,.chip.n-summary{background:#fff1de;color:#9a5b00}
.chip.n-nudge,.chip.n-hook{background:#f1e8ff;color:#5b2ea6}
.chip.n-budget,.chip.n-extension,.chip.n-approval{background:#fff2d6;color:#9a5b00}
.chip.n-error{background:var(--bad-bg);color:var(--bad)}
.chip.n-phase{background:#e7f6ee;color:#17663a}
.chip.n-run,.chip.n-state{background:#eef1f6;color:#475467}
.chip.edit{background:#e6f0ff;color:#1f4fa8}
.phase-tag{font-size:11px;border-radius:4px;padding:0 6px;text-transform:uppercase;
letter-spacing:.04em;color:#1d2330}
.phase-tag.discover{background:#cfe0ff}.phase-tag.plan{background:#e4d7ff}
.phase-tag.act{background:#ffe2b8}.phase-tag.verify{background:#c9f0d6}
.phase-tag.done{background:#8fd6a5}.phase-tag.fail{background:#f6b3ab}
.step-meta{margin-left:auto;color:var(--muted);font-size:12px;white-space:nowrap}
.step-body{padding:4px 14px 10px 14px;border-top:1px solid var(--line)}
.note{margin:6px 0;padding:4px 10px;border-radius:6px;font-size:13px;background:#f5f6f8}
.note b{font-weight:600}.note .d{color:var(--muted);display:block;white-space:pre-wrap}
.note.n-error{background:var(--bad-bg)}.note.n-compaction,.note.n-summary{background:#fff6e8}
.note.n-nudge,.note.n-hook{background:#f6f0ff}.note.n-phase{background:#eef9f2}
.note.n-budget,.note.n-extension,.note.n-approval{background:#fff8e6}
.say{margin:8px 0;padding:8px 12px;border-radius:8px;background:#f4f6fb;white-space:pre-wrap;
word-break:break-word}
.say .who{font-size:11px;color:var(--muted);display:block}
details.call{margin:6px 0;border:1px solid var(--line);border-radius:6px}
details.call>summary{cursor:pointer;padding:4px 10px;display:flex;gap:8px;align-items:baseline}
details.call>summary code{color:var(--muted);overflow:hidden;text-overflow:ellipsis;
white-space:nowrap;max-width:70ch}
details.call .res{margin-left:auto;font-size:12px;white-space:nowrap}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}
details.call .io{padding:6px 10px;border-top:1px solid var(--line);display:grid;gap:6px}
details.call .io pre{background:var(--code);padding:6px 8px;border-radius:4px;max-height:28em;
overflow:auto}
.io .lbl{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
table.files{border-collapse:collapse;width:100%;margin-bottom:14px;font-size:13px}
table.files th,table.files td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line)}
table.files th{color:var(--muted);font-weight:500}
.plus{color:var(--ok)}.minus{color:var(--bad)}
details.change{border:1px solid var(--line);border-radius:6px;margin:0 0 10px}
details.change>summary{cursor:pointer;padding:6px 10px;display:flex;gap:10px;align-items:center;
flex-wrap:wrap;background:#fafbfc}
.kind{font-size:11px;text-transform:uppercase;padding:1px 6px;border-radius:4px;background:#eef1f6}
.kind.created{background:var(--ok-bg);color:var(--ok)}
.kind.deleted{background:var(--bad-bg);color:var(--bad)}
.state{font-size:12px;padding:1px 8px;border-radius:10px}
.state.pending{background:#e8edff;color:#23399a}
.state.undone{background:#eef1f6;color:#667085;text-decoration:line-through}
.state.sealed{background:var(--warn-bg);color:var(--warn)}
pre.diff{padding:6px 0;overflow:auto;max-height:40em;white-space:pre}
pre.diff span{display:block;padding:0 10px}
pre.diff .a{background:#e6ffec}pre.diff .d{background:#ffebe9}
pre.diff .h{background:#eef3ff;color:#4a5c92}pre.diff .m{color:var(--muted)}
table.tree{border-collapse:collapse;width:100%;font-size:13px}
table.tree td,table.tree th{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left}
table.tree th{color:var(--muted);font-weight:500}
table.tree td.num,table.tree th.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{font-size:12px;padding:1px 8px;border-radius:10px;background:#eef1f6}
.badge.success{background:var(--ok-bg);color:var(--ok)}
.badge.failure{background:var(--bad-bg);color:var(--bad)}
.badge.capacity,.badge.unfinished{background:var(--warn-bg);color:var(--warn)}
.empty{color:var(--muted)}
footer{color:var(--muted);font-size:12px;text-align:center;margin-top:24px}
"""

SCRIPT = """
(function(){
var data=JSON.parse(document.getElementById('jm-data').textContent);
var tip=document.getElementById('tip');
function fmt(n){return n.toLocaleString('en-US');}
function usd(n){return n===null?'unknown':'$'+n.toFixed(n<1?4:2);}
function openStep(i){
  var el=document.getElementById('step-'+data.steps[i]);
  if(!el)return;
  el.hidden=false;el.open=true;el.scrollIntoView({block:'start'});
  history.replaceState(null,'','#step-'+data.steps[i]);
}
function index(svg,ev){
  var box=svg.getBoundingClientRect();
  var scale=box.width/Number(svg.dataset.width);
  var x=(ev.clientX-box.left)/scale-Number(svg.dataset.left);
  var n=Number(svg.dataset.count);
  var i=Math.floor(x/(Number(svg.dataset.plotWidth)/n));
  return (i<0||i>=n)?-1:i;
}
var charts=document.querySelectorAll('svg.chart');
function cursor(i){
  charts.forEach(function(svg){
    var line=svg.querySelector('.cursor');if(!line)return;
    if(i<0){line.setAttribute('visibility','hidden');return;}
    var slot=Number(svg.dataset.plotWidth)/Number(svg.dataset.count);
    var x=Number(svg.dataset.left)+(i+0.5)*slot;
    line.setAttribute('x1',x);line.setAttribute('x2',x);line.setAttribute('visibility','visible');
  });
}
charts.forEach(function(svg){
  svg.addEventListener('mousemove',function(ev){
    var i=index(svg,ev);
    if(i<0){tip.style.display='none';cursor(-1);return;}
    var lines=['step '+data.steps[i]+(data.phase[i]?'  ['+data.phase[i]+']':''),
      'input '+fmt(data.input[i])+'  cache read '+fmt(data.cacheRead[i])+
      (data.cacheWrite[i]?'  cache write '+fmt(data.cacheWrite[i]):''),
      'output '+fmt(data.output[i]),
      'cost '+usd(data.cost[i])+'  total '+usd(data.cumCost[i])];
    if(data.compacted[i])lines.push('context compacted');
    tip.textContent=lines.join('\\n');
    tip.style.display='block';
    tip.style.left=Math.min(ev.clientX+14,window.innerWidth-tip.offsetWidth-8)+'px';
    tip.style.top=(ev.clientY+14)+'px';
    cursor(i);
  });
  svg.addEventListener('mouseleave',function(){tip.style.display='none';cursor(-1);});
  svg.addEventListener('click',function(ev){var i=index(svg,ev);if(i>=0)openStep(i);});
});
var steps=Array.prototype.slice.call(document.querySelectorAll('details.step'));
var search=document.getElementById('filter-text');
var onlyErr=document.getElementById('filter-errors');
var onlyChanged=document.getElementById('filter-changes');
var onlyNotes=document.getElementById('filter-notes');
var shown=document.getElementById('shown');
function filter(){
  var q=search.value.trim().toLowerCase();var count=0;
  steps.forEach(function(s){
    var ok=(!onlyErr.checked||s.classList.contains('err'))&&
      (!onlyChanged.checked||s.classList.contains('changed'))&&
      (!onlyNotes.checked||s.classList.contains('noted'))&&
      (!q||s.textContent.toLowerCase().indexOf(q)>=0);
    s.hidden=!ok;if(ok)count++;
  });
  shown.textContent=count+' of '+steps.length+' steps shown';
}
[search,onlyErr,onlyChanged,onlyNotes].forEach(function(el){
  el.addEventListener('input',filter);});
var timeline=document.getElementById('timeline');
function openAll(open){
  timeline.querySelectorAll('details').forEach(function(d){
    var step=d.closest('details.step');
    if(!open||!step||!step.hidden)d.open=open;
  });
}
document.getElementById('expand').addEventListener('click',function(){openAll(true);});
document.getElementById('collapse').addEventListener('click',function(){openAll(false);});
function fromHash(){
  var el=location.hash&&document.getElementById(location.hash.slice(1));
  if(el&&el.tagName==='DETAILS'){el.hidden=false;el.open=true;el.scrollIntoView();}
}
window.addEventListener('hashchange',fromHash);fromHash();
filter();
var root=document.documentElement;
root.setAttribute('data-ready',Math.round(performance.now()));
requestAnimationFrame(function(){setTimeout(function(){
  root.setAttribute('data-painted',Math.round(performance.now()));},0);});
})();
"""
