"""PyGithub through the gate (HTTPS_PROXY / HTTP_PROXY, REQUESTS_CA_BUNDLE): Github(base_url=...)
pointed at the GitHub stand-in, opening an issue as an agent does.

  github_client.py BASE_URL OWNER/REPO TITLE twice   create_issue twice
  github_client.py BASE_URL OWNER/REPO TITLE retry   create_issue once, PyGithub's own retry
                                                     (Github(retry=...)) retrying a 5xx
"""
import sys

from github import Github, GithubException
from urllib3.util.retry import Retry

from report import emit, usage

base_url, full_name, title, mode = usage(sys.argv, ["BASE_URL", "OWNER/REPO", "TITLE", "twice|retry"])
retry = (
    Retry(total=2, status_forcelist=[502, 503, 504], allowed_methods=None, backoff_factor=0, raise_on_status=False)
    if mode == "retry"
    else None
)
gh = Github("ghp_stand_in_token", base_url=base_url, retry=retry, timeout=30)
repo = gh.get_repo(full_name, lazy=True)
for _ in range(1 if mode == "retry" else 2):
    try:
        issue = repo.create_issue(title=title, body="opened by an agent")
        emit(201, issue.raw_headers, None, body={"title": issue.title, "html_url": issue.html_url})
    except GithubException as e:
        emit(e.status, e.headers, str(e), type(e).__name__)
