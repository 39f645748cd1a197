DEFAULTS = {
    "report": {
        "title": "Daily report",
        "columns": ["name", "total"],
        "footer": "end of report",
    },
    "width": 40,
}
