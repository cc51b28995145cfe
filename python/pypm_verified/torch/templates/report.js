(function(){
var D=JSON.parse(document.getElementById('pm-data').textContent);
var panel=document.getElementById('details');
function esc(s){return String(s==null?'':s).replace(/[&<>"]/g,function(c){
 return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function evText(i){var e=D.events[i],h='<li><b>'+esc(e.pattern)+'</b> ';
 if(e.status==='fired')h+='fired: rule <b>'+esc(e.rule)+'</b>'+(e.created.length?
  ' built '+esc(e.created.join(', ')):'');
 else if(e.status==='declined'){h+='matched, <b>no rule fired</b>:<ul>';
  e.declines.forEach(function(d){h+='<li>'+esc(d[0])+': <span class="reason">'+esc(d[1])+
  '</span></li>';});h+='</ul>';}
 else if(e.status==='matched')h+='matches here';
 else if(e.status==='near')h+='near miss from <b>'+esc(e.root)+'</b>'+(e.at?', failed at <b>'+
  esc(e.at)+'</b>':'')+'<div class="reason">'+esc(e.message)+'</div>';
 h+='<div class="dim">root '+esc(e.root)+(e.cover.length>1?', '+e.cover.length+
  ' nodes matched':'')+'</div>';
 var b=Object.keys(e.bindings||{});if(b.length)h+='<div class="dim">bindings: '+
  esc(b.map(function(k){return k+'='+e.bindings[k];}).join(', '))+'</div>';
 return h+'</li>';}
function show(g,name){var d=(D.nodes[g]||{})[name];if(!d){return;}
 var h='<h3>'+esc(name)+'</h3><div><span class="k">'+esc(g)+' graph</span></div>';
 h+='<div><span class="k">op</span> '+esc(d.target)+'</div>';
 if(d.shape)h+='<div><span class="k">shape</span> '+esc(d.shape)+'</div>';
 if(d.dtype)h+='<div><span class="k">dtype</span> '+esc(d.dtype)+'</div>';
 if(d.module)h+='<div><span class="k">module</span> '+esc(d.module)+'</div>';
 if(d.nodes)h+='<div><span class="k">collapsed</span> '+d.nodes+' nodes, '+esc(d.like)+'</div>';
 if(d.args&&d.args.length)h+='<div><span class="k">args</span> '+esc(d.args.join(', '))+'</div>';
 if(d.events.length){h+='<div style="margin-top:6px"><b>matches</b></div><ul>';
  var seen=0;d.events.forEach(function(i){if(seen++<40)h+=evText(i);});
  if(d.events.length>40)h+='<li>… '+(d.events.length-40)+' more</li>';h+='</ul>';}
 else h+='<div class="dim" style="margin-top:6px">no match on this node</div>';
 panel.innerHTML=h;}
var pinned=null;
function nameOf(el){return el.getAttribute('data-name');}
var svgs=document.querySelectorAll('svg.graph');
svgs.forEach(function(svg){var g=svg.getAttribute('data-graph');
 svg.querySelectorAll('g.node').forEach(function(n){
  var t=n.querySelector('title');n.setAttribute('data-name',t?t.textContent:'');
  n.addEventListener('mouseenter',function(){show(g,nameOf(n));});
  n.addEventListener('mouseleave',function(){if(pinned)show(pinned.closest('svg')
   .getAttribute('data-graph'),nameOf(pinned));});
  n.addEventListener('click',function(ev){if(pinned)pinned.classList.remove('sel');
   if(pinned===n){pinned=null;return;}pinned=n;n.classList.add('sel');show(g,nameOf(n));
   ev.stopPropagation();});});});
function fit(view){var svg=view.querySelector('svg.graph');if(!svg)return;
 var w=+svg.getAttribute('data-w'),h=+svg.getAttribute('data-h');
 var z=+(view.getAttribute('data-zoom')||1);
 svg.setAttribute('width',(w*z).toFixed(1)+'pt');svg.setAttribute('height',(h*z).toFixed(1)+'pt');}
document.querySelectorAll('.panel').forEach(function(p){var v=p.querySelector('.view');
 p.querySelectorAll('button[data-z]').forEach(function(b){b.addEventListener('click',function(){
  var z=+(v.getAttribute('data-zoom')||1),k=b.getAttribute('data-z');
  if(k==='fit'){var svg=v.querySelector('svg.graph');
   z=Math.min(1,v.clientWidth/(+svg.getAttribute('data-w')*4/3));}
  else z=Math.max(0.05,Math.min(4,z*(+k)));
  v.setAttribute('data-zoom',z);fit(v);});});});
window.pmFocus=function(id){var el=document.getElementById(id);if(!el)return false;
 var v=el.closest('.view');var r=el.getBoundingClientRect(),vr=v.getBoundingClientRect();
 v.scrollTop+=r.top-vr.top-vr.height*0.6;v.scrollLeft+=r.left-vr.left-vr.width/2+r.width/2;
 return true;};
document.querySelectorAll('[data-focus]').forEach(function(li){li.addEventListener('click',
 function(){var id=li.getAttribute('data-focus');pmFocus(id);var el=document.getElementById(id);
 if(el){if(pinned)pinned.classList.remove('sel');pinned=el;el.classList.add('sel');
 show(el.closest('svg').getAttribute('data-graph'),nameOf(el));}});});
function place(el,rect,y){var v=el.closest('.view'),vr=v.getBoundingClientRect();
 v.scrollTop+=rect.top-y;v.scrollLeft+=(rect.left+rect.right)/2-(vr.left+vr.right)/2;}
// start on the focus match: its nodes at the top of the view, details shown;
// what it became (after) level with its root
var first=D.focus,hash=decodeURIComponent(location.hash.slice(1));
if(hash&&document.getElementById(hash)){var h=document.getElementById(hash);  // a link to a node
 first={id:hash,graph:h.closest('svg').getAttribute('data-graph'),name:nameOf(h)};}
if(first){var el=document.getElementById(first.id);
 if(el){pinned=el;el.classList.add('sel');show(first.graph,first.name);
  var r=null;(first.cover||[first.id]).forEach(function(id){var c=document.getElementById(id);
   if(!c)return;var b=c.getBoundingClientRect();r=r?{top:Math.min(r.top,b.top),
   left:Math.min(r.left,b.left),right:Math.max(r.right,b.right)}:
   {top:b.top,left:b.left,right:b.right};});
  var vr=el.closest('.view').getBoundingClientRect();place(el,r,vr.top+vr.height*0.05);
  var y=el.getBoundingClientRect().top;
  (first.also||[]).forEach(function(id){var a=document.getElementById(id);
   if(a)place(a,a.getBoundingClientRect(),y);});}}
var counts={};['fired','declined','created','matched','near','near-at','collapsed']
 .forEach(function(k){counts[k]=document.querySelectorAll('svg.graph g.node.'+k).length;});
document.body.setAttribute('data-highlighted',JSON.stringify(counts));
document.body.setAttribute('data-ready','1');
})();
