"""Fleet-wide workflows: the fleet guard and the fleet incident it opens, a storm's turn-keeper, a pool's
storm fence."""
