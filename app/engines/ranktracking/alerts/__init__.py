"""Alerts and e-mail reports of position tracking schedules: rules that fire when a keyword enters
or leaves the top N or moves by K places (evaluated by a job when a measured request ends, each
alert delivered once per run by e-mail or a signed webhook), and a weekly or monthly report."""
