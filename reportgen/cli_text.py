"""The command line's help texts: the exit codes and the epilogs of compare, publish and ab (docs/exit-codes.md
holds the same codes in full)."""

EXIT_CODES_HELP = """exit codes:
  0  success
  1  compare --fail-on-regression: a variant is significantly slower, or its memory per call grew; history
     --fail-on-step: a new step
  2  bad command-line arguments
  3  bad input: a bundle, trace or site is missing, corrupt or of an unknown version; build --strict: a warning; or
     the system refused a path (name too long, loop of links, no space, read-only, no permission)
  4  profile: at least one variant failed or gave a wrong result (the run is still stored)
  5  the requested device or its software (torch, torch_neuronx) is not present
  6  conflict: another reportgen holds the lock, the run already exists, or doctor's <out>.tar.gz exists
  7  ab: still inconclusive when the time budget ran out
 70  internal error (a bug: please report it with the traceback from REPORTGEN_DEBUG=1)
130  interrupted (Ctrl-C); stored runs and the site are unchanged
"""

COMPARE_EPILOG = """A change counts when |head/base - 1| >= --threshold AND its 95 % bootstrap interval excludes 0.
Runs of different devices or scenario parameters are refused; differing software versions are warned about.

exit codes:
  0  compared (no significant slowdown, or --fail-on-regression not given)
  1  --fail-on-regression: a variant is significantly slower, or failed/incorrect in HEAD but OK in BASE,
     or its memory per call grew beyond --memory-threshold (the comment says time or memory)
  2  bad command-line arguments (--threshold, --site-url); --output is not a regular file, a new path
     or a symlink to one, or cannot be written, or lies inside the store, a run bundle or a built site
  3  a run is missing or corrupt, or the runs cannot be compared (device or scenario parameters differ)
 70  internal error
"""

PUBLISH_EPILOG = """The site must be built and clean: manifest.json and .nojekyll present, every file and run page the
manifest lists present, and no .site-tmp-*/.tmp-* build folder next to it or inside it.

exit codes:
  0  published (or the branch already held this site)
  3  the site is missing, not built or dirty; not a git repository; a git command (e.g. the push) failed
  6  the branch moved while publishing: run it again
"""


AB_EPILOG = """Base and head are measured in one job, on one device, each side in its own worker process that imports its
own checkout's scenario (and the user's package from that tree), in interleaved rounds (ABBA order), in several
sessions: each session is a fresh pair of worker processes (two processes running the same code differ by a fixed
amount for their whole life). Per round and variant: the median of each side's block and the ratio head/base; per
session, the Hodges-Lehmann centre of its ABBA pairs of rounds' ratios; a 95 % interval over sessions (Wilcoxon
signed-rank, Hodges-Lehmann, on the logs of the session ratios).
Regression/improvement only when the whole interval lies beyond +/- --threshold; no change when inside; while
inconclusive, more sessions up to --max-seconds. See docs/ab-testing.md.

exit codes:
  0  no change or improvement (also: the scenario exists on one side only: new or removed)
  1  regression: a variant is slower beyond the threshold, or fails to compile or is wrong in head only (named),
     or its memory per call grew beyond --memory-threshold (the headline says time or memory)
  2  bad command-line arguments, or the scenario exists on neither side
  3  a side failed to import its scenario or make its inputs (named in the comment)
  7  still inconclusive when the time budget ran out
 70  internal error
"""
