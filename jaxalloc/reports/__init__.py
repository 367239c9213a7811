"""Reports: a plan for people, as text tables, Gantt charts, CSV and Chrome trace events."""
