"""The fleet guard's vocabulary: permits and answers, the ledger, its policy section, its arithmetic."""
