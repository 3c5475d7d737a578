"""Example texts, written into the package (nothing is downloaded).

``TSNE_ABSTRACT`` is the project's standard text: the thesis applies attention-head t-SNE to it (section 4.2,
Appendix A.4), so results here can be compared with its figures. ``CORPUS`` holds 142 texts of 9 to 67
MiniLM tokens (special ones included; median 21), written for this project: science, everyday life,
news-like reports, dialogue, lists, code-ish lines, questions, instructions, short stories and a few longer
paragraphs, so that a head's structure can be compared across kinds of text with
:func:`headsne_widget.studies.corpus.corpus_study`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CORPUS", "SENSES", "TSNE_ABSTRACT"]

#: Abstract of van der Maaten and Hinton (2008), "Visualizing Data using t-SNE", verbatim from the thesis's
#: Appendix A.4 (its two halves, split there by a page break, joined with one space).
TSNE_ABSTRACT: str = (
    'We present a new technique called "t-SNE" that visualizes high-dimensional data by giving each '
    "datapoint a location in a two or three-dimensional map. The technique is a variation of Stochastic "
    "Neighbor Embedding (Hinton and Roweis, 2002) that is much easier to optimize, and produces "
    "significantly better visualizations by reducing the tendency to crowd points together in the center "
    "of the map. t-SNE is better than existing techniques at creating a single map that reveals structure"
    " at many different scales. This is particularly important for high-dimensional data that lie on "
    "several different, but related, low-dimensional manifolds, such as images of objects from multiple "
    "classes seen from multiple viewpoints. For visualizing the structure of very large data sets, we "
    "show how t-SNE can use random walks on neighborhood graphs to allow the implicit structure of all of"
    " the data to influence the way in which a subset of the data is displayed. We illustrate the "
    "performance of t-SNE on a wide variety of data sets and compare it with many other non-parametric "
    "visualization techniques, including Sammon mapping, Isomap, and Locally Linear Embedding. The "
    "visualizations produced by t-SNE are significantly better than those produced by the other "
    "techniques on almost all of the data sets."
)

#: 142 varied English sentences and short paragraphs, written for this project.
CORPUS: tuple[str, ...] = (
    # science
    "Water boils at a lower temperature on a mountain because the air pressure there is lower.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen inside the leaves of plants.",
    "A neutron star packs more mass than the Sun into a sphere about twenty kilometres across.",
    "The mitochondria in each cell release energy from food by slowly burning it with oxygen.",
    "When two waves meet, their heights add up: crests on crests grow, crests on troughs cancel.",
    "Sound travels about four times faster in water than in air, and faster still in steel.",
    "Enzymes speed up chemical reactions without being used up, so a few molecules can do a lot of work.",
    "The Moon always shows the same face to the Earth because it turns once on its axis for every orbit. Tidal "
    "forces slowed its spin over billions of years until the two periods matched, a state astronomers call "
    "tidal locking.",
    "Glaciers move. Under their own weight, the lower layers of ice deform like a very thick syrup.",
    "Vaccines train the immune system by showing it a harmless piece of a germ before the real infection arrives.",
    "Entropy in a closed system never decreases, which is why a broken cup does not reassemble itself.",
    "Bees find their way home by the position of the Sun, even when clouds hide most of the sky, because they "
    "can see the pattern of polarised light.",
    "Light from the nearest star beyond the Sun takes a little over four years to reach us.",
    "Earthquakes happen when rocks along a fault stick, build up strain and then slip all at once.",
    "A gradient points in the direction of steepest increase; walking against it leads downhill.",
    "In a random sample of twenty-three people, the chance that two share a birthday is just over one half.",
    "Prime numbers thin out as they grow, yet there is no largest one, as Euclid showed long ago.",
    "Soil is alive: a teaspoon of it can hold more microbes than there are people on Earth.",
    "Rust forms when iron meets water and oxygen, and salt makes the reaction go faster.",
    "The heart of a hummingbird can beat more than a thousand times a minute while it hovers.",
    "Matrices multiply row by column, so the product AB is usually not the same as BA.",
    "Octopuses have three hearts and blue blood, and most of their neurons sit in their arms rather than in "
    "their brains.",
    # everyday
    "I forgot my umbrella again, so I waited under the bus shelter until the rain eased off.",
    "The kettle clicked off just as the phone rang.",
    "She folded the laundry while the radio played old songs from the seventies.",
    "We moved the sofa closer to the window so the cat could sleep in the afternoon sun.",
    "My neighbour waters his tomatoes every evening at exactly seven o'clock.",
    "The bakery on the corner sells out of rye bread before nine on Saturdays.",
    "He set three alarms and still overslept.",
    "After dinner we played cards at the kitchen table until the candles burned down and nobody could "
    "remember whose turn it was.",
    "The library is quiet on Tuesday mornings, apart from the printer that never stops humming.",
    "Remember to take the recycling out; the truck comes early tomorrow.",
    "The train was twenty minutes late, so I finished my book on the platform.",
    "Grandmother's soup recipe fits on a single card, but nobody makes it taste quite like she did.",
    "Our garden has more snails than lettuces this year.",
    "I learned to ride a bicycle on a gravel path, and my knees still remember it.",
    "They painted the hallway a pale yellow that looks green in the morning light.",
    "The market smelled of oranges, fresh coffee and wet cardboard after the rain.",
    "On Sundays the whole street seems to sleep in, except for the dog at number twelve.",
    "The shop assistant wrapped the present in brown paper and tied it with red string.",
    "I keep meaning to fix the squeaky door, but by now it feels like part of the house.",
    "The children built a fort out of cushions and refused to come out for lunch.",
    # news-like
    "The city council voted on Tuesday to extend the night bus service to the northern suburbs.",
    "Heavy snow closed several mountain passes overnight, and officials urged drivers to stay at home.",
    "Shares in the chip maker rose eight percent after it reported stronger demand from data centres.",
    "A rare manuscript, missing for more than a century, was found in the attic of a country house.",
    "The national team won the final on penalties after a goalless two hours of football.",
    "Firefighters contained the forest fire by Thursday evening, helped by a sudden change in the wind.",
    "The central bank held interest rates steady, saying inflation was falling but remained above its target.",
    "Researchers announced a battery design that charges in ten minutes and lasts for thousands of cycles, "
    "although the materials are still too expensive for phones and cars.",
    "Local farmers reported the driest spring in forty years, and water use will be restricted from June.",
    "The museum will reopen next month after a two-year renovation of its glass roof.",
    "Officials confirmed that the bridge will remain closed to heavy vehicles until repairs are finished.",
    "Thousands of runners crossed the city on Sunday in the marathon's fiftieth edition.",
    "A new law requires supermarkets to donate unsold food that is still safe to eat.",
    "The airline cancelled dozens of flights after a software fault grounded its fleet for several hours.",
    "Election turnout reached its highest level in three decades, with young voters leading the increase.",
    "The orchestra announced that its new conductor, aged thirty-one, will be the youngest in its history.",
    # dialogue
    '"Are you coming tonight?" she asked. "Only if you promise there will be no karaoke," he said.',
    '"Where did you put the keys?" "On the hook, where they always are." "They are not there."',
    "A: Can I borrow your charger? B: Sure, but bring it back before my meeting.",
    '"I think we are lost," said the driver. "We are not lost," said the map, or rather its owner.',
    '"How much is this?" "Twelve euros." "And if I take two?" "Twenty-four euros."',
    '"Did you finish the report?" "Almost. I just need the figures from last quarter." "Those are on the '
    'shared drive." "Of course they are. Thanks."',
    "Doctor: How long have you had the cough? Patient: About two weeks, and it gets worse at night.",
    '"Nice weather for ducks," the postman said, shaking the water off his hat.',
    '"Tell me the truth," she said. "Did you eat the last biscuit?" He looked at the dog.',
    "Teacher: Who can tell me what a noun is? Student: A word for a thing, like desk or homework.",
    '"Let\'s take the long way," he said, "the view is worth it." She checked her watch and agreed.',
    # lists
    "Shopping list: eggs, flour, two lemons, butter, a bag of rice and something for dessert.",
    "To pack: passport, tickets, charger, toothbrush, a warm jumper and the book I never finish.",
    "The planets in order are Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and Neptune.",
    "Ingredients: 200 g flour, 100 g sugar, 2 eggs, 1 teaspoon of baking powder, a pinch of salt.",
    "Step one: unplug the device. Step two: remove the back cover. Step three: replace the battery.",
    "Red, orange, yellow, green, blue, indigo, violet.",
    "Monday: gym. Tuesday: piano lesson. Wednesday: nothing at all. Thursday: dentist. Friday: pizza.",
    "Things to fix: the gate, the leaking tap, the wobbly chair and the bicycle's back light.",
    "Top three reasons to walk to work: fresh air, no traffic jams and a free coffee on the way.",
    "Primary colours of light are red, green and blue; of paint, they are traditionally red, yellow and blue.",
    "Agenda: 1. Welcome. 2. Budget review. 3. New office plans. 4. Any other business. 5. Close.",
    # code-ish
    "for i in range(10): print(i * i)",
    "def add(a, b): return a + b",
    "SELECT name, age FROM users WHERE age > 30 ORDER BY name;",
    "git commit -m 'fix the off-by-one error in the loop'",
    "x = [n for n in numbers if n % 2 == 0]  # keep the even numbers",
    "if (count > limit) { throw new Error('too many requests'); }",
    "The function returns None when the list is empty, otherwise the largest element.",
    "pip install --upgrade numpy pandas matplotlib",
    "while not done: step = optimiser.step(); done = step.loss < 1e-3",
    "Set the environment variable DEBUG=1 and restart the server to see the full stack trace.",
    "const total = items.reduce((sum, item) => sum + item.price, 0);",
    "The test failed because the expected array had shape (3, 4) but the result had shape (4, 3).",
    # questions
    "Why is the sky blue during the day but red at sunset?",
    "How many litres of water does a person need to drink on a hot day?",
    "What would happen if the Moon were twice as close to the Earth?",
    "Is it faster to walk up a moving staircase or to wait for the lift?",
    "Who decided that a week should have seven days, and why not ten?",
    "Can a computer program ever be sure that another program will stop?",
    "Where do birds sleep when it rains all night?",
    "Which is heavier, a kilogram of feathers or a kilogram of iron?",
    "Do plants grow faster when you talk to them, or is that a myth?",
    "How does a refrigerator keep food cold when the room around it is warm?",
    "What makes a joke funny, and why do some jokes stop being funny after you hear them twice?",
    # instructions and how-to
    "Preheat the oven to 180 degrees, grease the tin and bake the cake for about forty minutes.",
    "Turn left at the church, go straight past the school, and the station is on your right.",
    "To reset the router, hold the small button on the back for ten seconds until the lights flash.",
    "Water the seedlings lightly every morning and keep them out of direct midday sun for the first week.",
    "Before you start, read every step once, gather your tools and clear enough space on the table.",
    "Press and hold the power button, then choose restart from the menu that appears.",
    "Fold the paper in half, then in half again, and cut along the crease to make four equal cards.",
    # short stories and description
    "The lighthouse keeper counted the ships every night, though no ship had passed in years.",
    "At the edge of the village stood an old oak whose roots had split the road in two.",
    "The fox waited at the edge of the field until the farmer's lamp went out.",
    "Once upon a time, a clockmaker built a clock that ran backwards, and the whole town grew younger by a minute "
    "every hour until the mayor asked him, politely, to stop.",
    "The letter arrived forty years late, its stamp faded and its address written in a careful, shaking hand.",
    "Snow fell all night, and by morning the parked cars looked like sleeping animals.",
    "The robot swept the same corridor every day and, one day, stopped to look out of the window.",
    "Nobody knew who played the piano in the empty hall, but everyone stopped to listen.",
    "The sea was so calm that the boat seemed to float on a sheet of glass between two skies.",
    "She opened the map, traced the river with her finger and decided to follow it to the sea.",
    # opinions, idioms, miscellany
    "Good coffee is a small luxury that makes a long morning much shorter.",
    "It is easier to criticise a plan than to make one.",
    "Every city has a smell, and you only notice it after you have been away for a while.",
    "Practice does not make perfect; it makes permanent, so practise the right thing.",
    "The best time to plant a tree was twenty years ago; the second best time is today.",
    "Reading a good novel feels like living a second life for a few evenings.",
    "Don't count your chickens before they hatch.",
    "A meeting that could have been an email is still a meeting.",
    "Old maps are beautiful partly because they are wrong in such confident ways.",
    "Learning a language changes how you hear your own.",
    "Trains are slower than planes, but you arrive in the middle of the city with your thoughts intact.",
    "The internet remembers everything except where you saved that file.",
    # longer paragraphs
    "The first computers filled whole rooms and were programmed by plugging cables into boards. Today a phone "
    "holds millions of times their memory, yet the basic idea is the same: a list of simple instructions, "
    "carried out one after another very quickly, can add up to almost anything, from a weather forecast to a "
    "game of chess.",
    "Our village holds a fair every autumn. Farmers bring their largest pumpkins, the school choir sings on a "
    "wooden stage, and somebody always wins a goat in the raffle. Last year the goat escaped, ate half of the "
    "prize-winning cake and became the most popular guest of the whole day.",
    "Heavy rain is expected across the south-west from Friday afternoon, with up to eighty millimetres in some "
    "places. Forecasters warned that rivers could burst their banks by Saturday, and residents near the coast "
    "were advised to move cars and valuables to higher ground before the storm arrives.",
    "To make bread, mix flour, water, salt and a little yeast, then knead the dough for ten minutes until it is "
    "smooth and springy. Leave it somewhere warm for an hour, shape it, let it rise again, and bake it in a hot "
    "oven until the bottom sounds hollow when you tap it.",
    "Migrating birds cross entire continents twice a year. Some follow coastlines and rivers, some navigate by "
    "the stars, and many seem to sense the Earth's magnetic field. How they combine these cues, and how young "
    "birds find the way on their first journey alone, is still not fully understood.",
    "When the power went out, the whole building came alive. Neighbours who had never spoken knocked on doors "
    "with candles, someone brought a camping stove to the stairwell, and by midnight forty people were sharing "
    "soup and stories in the dark, a little sorry when the lights came back on.",
    # short
    "The cat sat on the warm mat.",
    "Lunch is ready in five minutes.",
    "Please close the door behind you.",
    "Where is the nearest train station?",
)

#: Ambiguous English words, each with hand-written sentences of two senses (written for this project): word ->
#: ((sentence, sense), ...), the word exactly once in every sentence, so the senses label its occurrences in
#: order (``word_contexts(word, [s for s, _ in SENSES[word]])``). Immutable: a read-only mapping of tuples.
SENSES: Mapping[str, tuple[tuple[str, str], ...]] = MappingProxyType(
    {
        "bank": (
            ("He withdrew money from his bank on Friday.", "finance"),
            ("The bank raised its interest rates again this year.", "finance"),
            ("She opened a savings account at the local bank.", "finance"),
            ("The bank approved our mortgage after a long wait.", "finance"),
            ("Robbers broke into the bank and emptied the vault.", "finance"),
            ("My bank charges a fee for every transfer abroad.", "finance"),
            ("The central bank printed more currency to pay the debt.", "finance"),
            ("He works as a teller at a bank in the city centre.", "finance"),
            ("Call the bank if your credit card is stolen.", "finance"),
            ("The bank lent the company two million dollars.", "finance"),
            ("He was fishing in the river from a sand bank.", "river"),
            ("We sat on the grassy bank and watched the ducks.", "river"),
            ("The flood waters rose over the bank of the stream.", "river"),
            ("Reeds grew thickly along the muddy bank of the lake.", "river"),
            ("The canoe drifted towards the far bank of the river.", "river"),
            ("Otters dig their dens into the river bank.", "river"),
            ("The children slid down the steep bank into the water.", "river"),
            ("Willows lean over the bank where the creek bends.", "river"),
            ("Erosion wore away the bank after the heavy rains.", "river"),
            ("A heron stood still on the bank, waiting for fish.", "river"),
        ),
        "bark": (
            ("The bark of the old oak was rough and deeply cracked.", "tree"),
            ("Birch bark peels off in thin white sheets.", "tree"),
            ("Beetles tunnel under the bark of dying pine trees.", "tree"),
            ("Cinnamon is made from the dried inner bark of a tree.", "tree"),
            ("Deer had stripped the bark from the young saplings.", "tree"),
            ("Moss covered the bark on the north side of the trunk.", "tree"),
            ("The canoe was built from the bark of a large birch.", "tree"),
            ("Cork comes from the thick bark of the cork oak.", "tree"),
            ("She carved her initials into the smooth bark of the beech.", "tree"),
            ("The bark protects the living wood beneath it from insects.", "tree"),
            ("The dog let out a loud bark when the doorbell rang.", "sound"),
            ("We heard a sharp bark from the neighbour's yard.", "sound"),
            ("The puppy gave a tiny bark at its own reflection.", "sound"),
            ("His bark is worse than his bite, said the dog's owner.", "sound"),
            ("A single bark from the sheepdog moved the whole flock.", "sound"),
            ("The fox answered with a short bark in the dark woods.", "sound"),
            ("The terrier's bark woke the whole street at dawn.", "sound"),
            ("A deep bark echoed from the kennel behind the house.", "sound"),
            ("The guard dog's bark warned us to keep away.", "sound"),
            ("Seals on the rocks greeted the boat with a hoarse bark.", "sound"),
        ),
        "flies": (
            ("Fruit flies like a banana.", "insect"),
            ("Swarms of flies buzzed around the rotting fruit.", "insect"),
            ("The frog caught two flies with its sticky tongue.", "insect"),
            ("Horse flies bite hard on hot summer days.", "insect"),
            ("She hung a sticky strip to trap the flies in the kitchen.", "insect"),
            ("Biologists breed flies to study how genes work.", "insect"),
            ("The spider wrapped the flies caught in its web.", "insect"),
            ("Flies laid their eggs on the meat left in the sun.", "insect"),
            ("Cows flick their tails to chase away the flies.", "insect"),
            ("The trout rose to eat the flies on the surface of the pond.", "insect"),
            ("Time flies like an arrow.", "moves"),
            ("She flies to Paris every Monday for work.", "moves"),
            ("The eagle flies high above the valley.", "moves"),
            ("Time flies when you are having fun.", "moves"),
            ("The flag flies over the castle on holidays.", "moves"),
            ("My uncle flies small planes for a living.", "moves"),
            ("The ball flies over the fence and into the street.", "moves"),
            ("A kite flies best on a steady windy afternoon.", "moves"),
            ("He flies into a rage whenever he loses.", "moves"),
            ("The pilot flies the night route from Tokyo.", "moves"),
        ),
        "bat": (
            ("A bat flew out of the cave at dusk.", "animal"),
            ("The bat hung upside down from the roof of the barn.", "animal"),
            ("Each bat eats thousands of mosquitoes in a night.", "animal"),
            ("The fruit bat has a wingspan of over a metre.", "animal"),
            ("A bat finds its prey in the dark by echolocation.", "animal"),
            ("The vampire bat feeds on the blood of cattle.", "animal"),
            ("We saw a bat swooping over the pond after sunset.", "animal"),
            ("The injured bat was taken to a wildlife rescue centre.", "animal"),
            ("A bat roosted in the attic of the old church.", "animal"),
            ("The tiny bat folded its leathery wings and slept.", "animal"),
            ("He swung the bat and hit the ball over the wall.", "sports"),
            ("The cricket bat is made of willow.", "sports"),
            ("She gripped the baseball bat with both hands.", "sports"),
            ("The batter broke his bat on a fast pitch.", "sports"),
            ("He oiled his new bat before the cricket season.", "sports"),
            ("A wooden bat leaned against the dugout wall.", "sports"),
            ("The coach handed the rookie a lighter bat.", "sports"),
            ("She signed the bat after hitting the winning run.", "sports"),
            ("The boy dropped the bat and ran to first base.", "sports"),
            ("An aluminium bat makes the ball fly farther.", "sports"),
        ),
        "spring": (
            ("The cherry trees blossom every spring.", "season"),
            ("In spring the days grow longer and warmer.", "season"),
            ("We plant the vegetables in late spring.", "season"),
            ("The birds return north in the spring.", "season"),
            ("Spring is the busiest season for the farm.", "season"),
            ("The lambs are born in early spring.", "season"),
            ("They married in the spring of that year.", "season"),
            ("The snow melts quickly once spring arrives.", "season"),
            ("The university term ends in the spring.", "season"),
            ("Allergies get worse in spring when pollen fills the air.", "season"),
            ("The villagers drew fresh water from a spring in the hills.", "water"),
            ("A hot spring bubbled up from the volcanic rock.", "water"),
            ("The stream begins at a spring high on the mountain.", "water"),
            ("Travellers filled their bottles at the cold spring.", "water"),
            ("The spring feeds a small pool where deer come to drink.", "water"),
            ("Mineral water from the spring is bottled at the source.", "water"),
            ("The old town was built around a natural spring.", "water"),
            ("Water trickles from the spring even in dry summers.", "water"),
            ("The hikers rested beside a clear spring in the forest.", "water"),
            ("The spring dried up after years of drought.", "water"),
        ),
    }
)
