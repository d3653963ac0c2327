// Filter the node table by status, search it by name and sort it by any
// column. The page is whole without this: it only hides and orders rows.
(function () {
	"use strict";
	var form = document.getElementById("controls");
	var table = document.getElementById("node-table");
	var search = document.getElementById("search");
	var shown = document.getElementById("shown");
	var rows = Array.prototype.filter.call(table.tBodies[0].rows, function (r) { return r.hasAttribute("data-o"); });
	var names = rows.map(function (r) { return r.cells[0].textContent.toLowerCase(); });
	var collator = new Intl.Collator(undefined, {numeric: true});

	function filter() {
		var st = form.elements.status.value, q = search.value.trim().toLowerCase(), n = 0;
		for (var i = 0; i < rows.length; i++) {
			var show = (!st || rows[i].className === st) && (!q || names[i].indexOf(q) >= 0);
			rows[i].hidden = !show;
			if (show) n++;
		}
		shown.textContent = n + " of " + rows.length + " nodes shown";
	}

	// The key of row r in column c, by the column's kind.
	var keys = {
		text: function (r, c) { return r.cells[c].textContent; },
		status: function (r) { return +r.getAttribute("data-o"); },
		number: function (r, c) { return parseInt(r.cells[c].textContent, 10) || 0; },
		time: function (r, c) { var t = r.cells[c].getAttribute("data-t"); return t === null ? -Infinity : +t; }
	};

	function sort(th, c) {
		var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
		var key = keys[th.getAttribute("data-sort")];
		var order = rows.map(function (r, i) { return {r: r, k: key(r, c), i: i}; });
		order.sort(function (a, b) {
			var d = typeof a.k === "string" ? collator.compare(a.k, b.k) : (a.k > b.k) - (a.k < b.k);
			return d * dir || a.i - b.i;
		});
		Array.prototype.forEach.call(th.parentNode.cells, function (h) { h.removeAttribute("aria-sort"); });
		th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
		rows = order.map(function (o) { return o.r; });
		names = rows.map(function (r) { return r.cells[0].textContent.toLowerCase(); });
		var frag = document.createDocumentFragment();
		rows.forEach(function (r) { frag.appendChild(r); });
		table.tBodies[0].appendChild(frag);
	}

	Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, c) {
		var b = document.createElement("button");
		b.type = "button";
		b.textContent = th.textContent;
		b.title = "sort by " + th.textContent.toLowerCase();
		b.addEventListener("click", function () { sort(th, c); });
		th.textContent = "";
		th.appendChild(b);
	});
	form.addEventListener("change", filter);
	search.addEventListener("input", filter);
	form.addEventListener("submit", function (e) { e.preventDefault(); });
	form.hidden = false;
	filter();

	// Printed, every failed line shows.
	var opened = [];
	addEventListener("beforeprint", function () {
		opened = Array.prototype.filter.call(document.querySelectorAll("details:not([open])"), function (d) { d.open = true; return true; });
	});
	addEventListener("afterprint", function () {
		opened.forEach(function (d) { d.open = false; });
	});
})();
