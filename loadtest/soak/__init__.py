"""The soak: writer and reader processes at once against the real servers, every answer
checked against an oracle of its own, optionally while a nemesis breaks things.

- run.py: `python -m gridagg_loadtest.soak` (this package's __main__), the run and its
  verdict;
- clients.py: the writer and reader processes and the crew that replaces dead ones;
- nemesis.py: faults on a schedule drawn from a seed;
- check.py: the clients' logs read back and judged; availability.py: what each fault
  cost the clients;
- oracle.py: the expected answers, from the rows and the requests alone (none of
  gridagg's parsers);
- report.py: the verdict as JSON, a table, and the soak's one current report in docs/soak/;
- late_write.py, visibility.py: two narrower checks with commands of their own.
"""
