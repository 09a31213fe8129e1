"""How the portal itself is deployed: the Helm chart and the tools that keep it honest."""
