// Command gencatalog writes the search test's catalogue: one UTCP manual per
// domain in testdata/catalog/, realistic tools with near-duplicates across
// domains (issues in GitHub and Jira, tracking a parcel or a food order,
// sharing a file or a document).
//
//	go run ./testdata/gencatalog   (from utcp/)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Each tool: "name | description | tags | params", params "name:type" with
// type string, integer, number, boolean, array or object; a trailing ! marks
// a required one.
var domains = map[string][]string{
	"github": {
		"create_issue | Open a new issue in a repository with a title, body and labels | issues,bugs | repo:string!,title:string!,body:string,labels:array",
		"list_issues | List issues of a repository, filtered by state, label or assignee | issues | repo:string!,state:string,labels:array,assignee:string",
		"close_issue | Close an issue in a repository | issues | repo:string!,number:integer!",
		"comment_on_issue | Add a comment to an issue or pull request | issues,comments | repo:string!,number:integer!,body:string!",
		"create_pull_request | Open a pull request from a branch into the base branch | pull-requests,code-review | repo:string!,head:string!,base:string!,title:string!",
		"merge_pull_request | Merge an approved pull request | pull-requests | repo:string!,number:integer!,method:string",
		"list_pull_requests | List open or closed pull requests of a repository | pull-requests | repo:string!,state:string",
		"get_repository | Get a repository's description, stars, default branch and topics | repositories | repo:string!",
		"search_code | Search source code across repositories for a string or symbol | code,search | query:string!,language:string",
		"list_commits | List the commits of a branch, newest first | commits,history | repo:string!,branch:string,since:string",
		"create_release | Tag a version and publish release notes | releases | repo:string!,tag:string!,notes:string",
	},
	"jira": {
		"create_issue | Create a Jira issue (story, task or bug) in a project | issues,tickets,agile | project:string!,summary:string!,type:string,description:string",
		"update_issue | Change the fields of a Jira issue | issues | key:string!,fields:object!",
		"transition_issue | Move an issue to another status in its workflow, e.g. In Progress or Done | issues,workflow | key:string!,status:string!",
		"assign_issue | Assign an issue to a team member | issues | key:string!,assignee:string!",
		"search_issues | Find issues with a JQL query | issues,search | jql:string!,max_results:integer",
		"add_comment | Comment on a Jira issue | comments | key:string!,body:string!",
		"create_sprint | Create a sprint on a Scrum board with start and end dates | sprints,agile | board:integer!,name:string!,start:string,end:string",
		"list_projects | List the Jira projects you can see | projects | ",
		"log_work | Log time spent on an issue | timesheets | key:string!,time_spent:string!,comment:string",
		"get_issue | Get a Jira issue with its status, assignee and comments | issues | key:string!",
	},
	"gmail": {
		"send_email | Send an email message to one or more recipients | email | to:array!,subject:string!,body:string!,cc:array,attachments:array",
		"search_emails | Search the mailbox for messages matching a query, sender or date | email,search | query:string!,max_results:integer",
		"get_email | Read one email message with its headers and body | email | id:string!",
		"reply_to_email | Reply to an email thread | email | id:string!,body:string!,reply_all:boolean",
		"forward_email | Forward an email to someone else | email | id:string!,to:array!,note:string",
		"create_draft | Save an email draft without sending it | email,drafts | to:array,subject:string,body:string",
		"delete_email | Move an email message to the trash | email | id:string!",
		"add_label | Put a label on email messages | email,labels | ids:array!,label:string!",
		"list_labels | List the mailbox labels and folders | email,labels | ",
		"mark_as_read | Mark email messages as read or unread | email | ids:array!,read:boolean",
	},
	"slack": {
		"post_message | Post a message to a Slack channel | chat,messaging | channel:string!,text:string!,thread_ts:string",
		"list_channels | List public and private channels of the workspace | chat,channels | limit:integer",
		"create_channel | Create a new Slack channel | chat,channels | name:string!,private:boolean",
		"invite_to_channel | Invite people to a channel | chat,channels | channel:string!,users:array!",
		"upload_file | Share a file in a channel or conversation | chat,files | channel:string!,filename:string!,content:string!",
		"search_messages | Search Slack messages across channels | chat,search | query:string!",
		"set_status | Set your Slack status text and emoji | chat,profile | text:string!,emoji:string,expires:integer",
		"add_reaction | React to a message with an emoji | chat | channel:string!,timestamp:string!,emoji:string!",
		"send_direct_message | Send a private direct message to a colleague | chat,messaging | user:string!,text:string!",
		"archive_channel | Archive a channel that is no longer used | chat,channels | channel:string!",
	},
	"twilio": {
		"send_sms | Send a text message (SMS) to a phone number | sms,messaging,phone | to:string!,body:string!,from:string",
		"make_call | Place an outbound phone call that plays a message | voice,phone | to:string!,message:string!",
		"list_messages | List SMS messages sent and received | sms | to:string,from:string,date:string",
		"get_call_log | Get the history of phone calls with durations | voice,phone | since:string",
		"buy_phone_number | Buy a new phone number in a country or area code | phone,numbers | country:string!,area_code:string",
		"send_whatsapp_message | Send a WhatsApp message to a phone number | whatsapp,messaging | to:string!,body:string!",
		"verify_phone_number | Send a one-time code to verify a phone number | verification,phone | to:string!,channel:string",
		"lookup_phone_number | Look up carrier and line type of a phone number | phone | number:string!",
	},
	"calendar": {
		"create_event | Schedule a meeting or event in the calendar with attendees | meetings,events,scheduling | title:string!,start:string!,end:string!,attendees:array,location:string",
		"list_events | List upcoming calendar events in a date range | events | from:string,to:string",
		"update_event | Reschedule or edit a calendar event | events | id:string!,start:string,end:string,title:string",
		"delete_event | Cancel and remove a calendar event | events | id:string!,notify:boolean",
		"find_free_time | Find a time slot when all attendees are free | scheduling,availability | attendees:array!,duration_minutes:integer!,within_days:integer",
		"invite_attendees | Add guests to an existing event | events | id:string!,emails:array!",
		"respond_to_invitation | Accept, decline or tentatively accept a meeting invitation | events,rsvp | id:string!,response:string!",
		"create_calendar | Create a new shared calendar | calendars | name:string!,timezone:string",
		"get_event | Get the details of a calendar event | events | id:string!",
	},
	"shop": {
		"search_products | Search the store's catalogue for products by keyword, brand or price | products,catalog,search | query:string!,max_price:number,brand:string",
		"get_product | Get a product's details, price, reviews and availability | products | product_id:string!",
		"add_to_cart | Add a product to the shopping cart | cart | product_id:string!,quantity:integer",
		"remove_from_cart | Remove an item from the shopping cart | cart | product_id:string!",
		"checkout | Pay for the shopping cart and place the order | orders,checkout | payment_method:string!,shipping_address:object!",
		"list_orders | List your past orders | orders | status:string,since:string",
		"get_order_status | Check the status of an order: paid, shipped or delivered | orders,delivery | order_id:string!",
		"cancel_order | Cancel an order that has not shipped yet | orders | order_id:string!,reason:string",
		"apply_coupon | Apply a discount code to the cart | cart,discounts | code:string!",
		"create_return | Start a return for items of a delivered order and get a return label | orders,returns | order_id:string!,items:array!,reason:string",
		"list_categories | List the product categories of the store | catalog | ",
	},
	"inventory": {
		"get_stock_level | Get how many units of a SKU are in stock per warehouse | stock,warehouse | sku:string!,warehouse:string",
		"adjust_stock | Correct the stock count of a SKU after damage or loss | stock | sku:string!,delta:integer!,reason:string",
		"transfer_stock | Move units of a SKU from one warehouse to another | stock,warehouse | sku:string!,from:string!,to:string!,quantity:integer!",
		"list_warehouses | List warehouses and their addresses | warehouse | ",
		"create_purchase_order | Order more units from a supplier | purchasing,suppliers | supplier:string!,lines:array!",
		"receive_shipment | Record goods received from a supplier into stock | stock,receiving | purchase_order:string!,lines:array!",
		"list_low_stock_items | List SKUs below their reorder point | stock,alerts | warehouse:string",
		"count_inventory | Start a cycle count of a warehouse zone | stock,audit | warehouse:string!,zone:string",
		"reserve_stock | Reserve units of a SKU for an order | stock | sku:string!,quantity:integer!,order_id:string!",
	},
	"payments": {
		"create_payment_intent | Charge a customer's card for an amount | payments,cards | amount:integer!,currency:string!,customer:string",
		"refund_payment | Refund a payment, fully or partly | payments,refunds | payment_id:string!,amount:integer,reason:string",
		"list_charges | List recent charges with their status | payments | customer:string,limit:integer",
		"create_customer | Create a paying customer record with an email | customers | email:string!,name:string",
		"create_subscription | Subscribe a customer to a recurring plan | subscriptions,billing | customer:string!,price:string!",
		"cancel_subscription | Cancel a customer's subscription | subscriptions,billing | subscription:string!,at_period_end:boolean",
		"get_balance | Get the account's available and pending balance | balance | ",
		"create_payout | Pay out the balance to the bank account | payouts | amount:integer!,currency:string!",
		"list_disputes | List chargebacks and disputes opened by card holders | disputes | status:string",
		"update_card | Update the card on file of a customer | cards,customers | customer:string!,card_token:string!",
	},
	"invoicing": {
		"create_invoice | Create an invoice for a client with line items | invoices,billing,accounting | client:string!,lines:array!,due_date:string",
		"send_invoice | Email an invoice to the client | invoices | invoice_id:string!,message:string",
		"list_invoices | List invoices by status or client | invoices | status:string,client:string",
		"mark_invoice_paid | Record a payment against an invoice | invoices,payments | invoice_id:string!,amount:number!,date:string",
		"void_invoice | Void an invoice sent by mistake | invoices | invoice_id:string!",
		"create_quote | Prepare a price quote (estimate) for a client | quotes,estimates | client:string!,lines:array!",
		"convert_quote_to_invoice | Turn an accepted quote into an invoice | quotes,invoices | quote_id:string!",
		"record_expense | Record a business expense with its receipt | expenses,accounting | amount:number!,category:string!,receipt:string",
		"get_profit_and_loss | Profit and loss report for a period | reports,accounting | from:string!,to:string!",
		"list_overdue_invoices | List invoices past their due date | invoices,collections | ",
	},
	"crm": {
		"create_contact | Add a person to the CRM with email, phone and company | contacts,leads | name:string!,email:string,phone:string,company:string",
		"update_contact | Update a contact's details | contacts | contact_id:string!,fields:object!",
		"search_contacts | Find contacts by name, email or company | contacts,search | query:string!",
		"create_deal | Create a sales opportunity with its value | deals,sales,pipeline | name:string!,value:number,contact_id:string",
		"update_deal_stage | Move a deal to another pipeline stage, e.g. won or lost | deals,pipeline | deal_id:string!,stage:string!",
		"list_deals | List deals in the sales pipeline | deals,pipeline | stage:string,owner:string",
		"log_call | Log a sales call with a contact and its notes | activities,calls | contact_id:string!,notes:string!,duration_minutes:integer",
		"create_task | Create a follow-up task for a contact | tasks,activities | contact_id:string!,title:string!,due:string",
		"get_company | Get a company account with its contacts and deals | companies | company_id:string!",
		"merge_contacts | Merge two duplicate contacts into one | contacts | primary_id:string!,duplicate_id:string!",
	},
	"support": {
		"create_ticket | Open a customer support ticket | tickets,helpdesk | subject:string!,description:string!,requester:string!,priority:string",
		"reply_to_ticket | Send a public reply to the customer on a support ticket | tickets,helpdesk | ticket_id:integer!,body:string!",
		"close_ticket | Mark a support ticket as solved | tickets | ticket_id:integer!",
		"assign_ticket | Assign a ticket to an agent or group | tickets | ticket_id:integer!,agent:string!",
		"list_open_tickets | List unsolved support tickets, oldest first | tickets,queue | group:string,priority:string",
		"add_internal_note | Add a private note on a ticket that the customer does not see | tickets,notes | ticket_id:integer!,note:string!",
		"search_knowledge_base | Search help center articles for an answer | knowledge-base,help | query:string!",
		"get_customer_satisfaction | Customer satisfaction (CSAT) score of solved tickets | metrics,csat | from:string,to:string",
		"escalate_ticket | Escalate an urgent ticket to tier 2 support | tickets,escalation | ticket_id:integer!,reason:string!",
		"merge_tickets | Merge duplicate tickets from the same customer | tickets | ticket_id:integer!,into:integer!",
	},
	"hr": {
		"list_employees | List employees with their department and manager | employees,directory | department:string",
		"get_employee | Get an employee's profile, role and contact details | employees | employee_id:string!",
		"request_time_off | Request vacation or sick leave for some days | leave,time-off,vacation | start:string!,end:string!,type:string",
		"approve_time_off | Approve or reject a leave request | leave,approvals | request_id:string!,approve:boolean!",
		"get_leave_balance | How many vacation and sick days an employee has left | leave,vacation | employee_id:string",
		"onboard_employee | Start onboarding a new hire: accounts, equipment, paperwork | onboarding,hiring | name:string!,start_date:string!,role:string!",
		"terminate_employee | Start the offboarding of an employee who leaves | offboarding | employee_id:string!,last_day:string!",
		"update_job_title | Change an employee's job title or department | employees | employee_id:string!,title:string!",
		"list_open_positions | List open job positions and their applicants | recruiting,jobs | ",
		"schedule_interview | Schedule a job interview with a candidate | recruiting,interviews | candidate:string!,interviewers:array!,time:string!",
	},
	"payroll": {
		"run_payroll | Run payroll for a pay period | payroll,salary | period:string!",
		"get_payslip | Get an employee's payslip for a month | payroll,payslips | employee_id:string!,month:string!",
		"update_salary | Change an employee's annual salary | payroll,salary,compensation | employee_id:string!,amount:number!,effective:string",
		"list_pay_runs | List past payroll runs with totals | payroll | year:integer",
		"calculate_tax_withholding | Compute the income tax to withhold from a salary | payroll,tax | gross:number!,state:string",
		"add_bonus | Add a one-time bonus to the next payroll | payroll,compensation | employee_id:string!,amount:number!",
		"set_direct_deposit | Set the bank account an employee is paid into | payroll,banking | employee_id:string!,iban:string!",
		"export_payroll_report | Export a payroll summary to CSV for accounting | payroll,reports | period:string!",
	},
	"weather": {
		"get_current_weather | Current temperature, wind and conditions for a city | weather,temperature | city:string!,units:string",
		"get_forecast | Daily weather forecast for the coming days | weather,forecast | city:string!,days:integer",
		"get_hourly_forecast | Hour-by-hour forecast for the next 48 hours, with rain chances | weather,forecast,rain | city:string!",
		"get_air_quality | Air quality index and pollen levels | air-quality,health | city:string!",
		"get_weather_alerts | Severe weather warnings (storms, floods, heat) for a region | weather,alerts | region:string!",
		"get_historical_weather | Weather observed on a past date | weather,history | city:string!,date:string!",
		"get_uv_index | UV index and sunburn risk | weather,uv | city:string!",
		"get_sunrise_sunset | Sunrise and sunset times for a place and date | astronomy | city:string!,date:string",
	},
	"maps": {
		"geocode_address | Turn a street address into latitude and longitude | geocoding,location | address:string!",
		"reverse_geocode | Find the address at a latitude and longitude | geocoding,location | lat:number!,lng:number!",
		"get_directions | Turn-by-turn directions between two places by car, bike, foot or transit | directions,navigation,routes | origin:string!,destination:string!,mode:string",
		"search_places | Find places nearby such as cafes, pharmacies or gas stations | places,search,nearby | query:string!,near:string",
		"get_travel_time | Estimated travel time and distance between two places with current traffic | travel-time,traffic,distance | origin:string!,destination:string!,mode:string",
		"get_place_details | Opening hours, phone and rating of a place | places | place_id:string!",
		"get_elevation | Elevation above sea level of a location | elevation | lat:number!,lng:number!",
		"autocomplete_address | Suggest complete addresses while typing | geocoding,autocomplete | input:string!",
		"compute_route_matrix | Travel times between many origins and destinations | routes,logistics | origins:array!,destinations:array!",
	},
	"travel": {
		"search_flights | Search flights between two airports on given dates, cheapest first | flights,airfare | from:string!,to:string!,depart:string!,return:string,passengers:integer",
		"book_flight | Book a flight offer for the passengers | flights,booking | offer_id:string!,passengers:array!",
		"cancel_flight_booking | Cancel a flight booking and request a refund | flights,booking | booking_ref:string!",
		"get_flight_status | Departure, arrival, gate and delays of a flight | flights,status | flight_number:string!,date:string",
		"search_hotels | Search hotels in a city for given dates and guests | hotels,accommodation | city:string!,check_in:string!,check_out:string!,guests:integer",
		"book_hotel | Book a hotel room | hotels,booking | hotel_id:string!,room_id:string!,guest_name:string!",
		"cancel_hotel_reservation | Cancel a hotel reservation | hotels,booking | reservation_id:string!",
		"check_in_online | Check in online for a flight and get the boarding pass | flights,check-in | booking_ref:string!,last_name:string!",
		"get_seat_map | Show the available seats on a flight | flights,seats | offer_id:string!",
		"list_trips | List your upcoming trips and bookings | trips,itinerary | ",
	},
	"rides": {
		"request_ride | Request a taxi ride from a pickup point to a destination | taxi,rides | pickup:string!,destination:string!,type:string",
		"estimate_fare | Estimate the price of a ride before requesting it | taxi,fares | pickup:string!,destination:string!",
		"cancel_ride | Cancel a requested ride | taxi,rides | ride_id:string!",
		"get_ride_status | Where is my driver: ride status and arrival time | taxi,rides | ride_id:string!",
		"search_rental_cars | Search rental cars at a location for given dates | car-rental,vehicles | location:string!,pick_up:string!,drop_off:string!",
		"book_rental_car | Reserve a rental car | car-rental,booking | offer_id:string!,driver_name:string!",
		"return_rental_car | Register the return of a rental car with its mileage and fuel | car-rental | booking_id:string!,mileage:integer",
		"rate_driver | Rate the driver of a finished ride | taxi,feedback | ride_id:string!,stars:integer!",
	},
	"food": {
		"search_restaurants | Find restaurants that deliver, by cuisine and rating | restaurants,delivery,food | cuisine:string,near:string!,min_rating:number",
		"get_menu | Get a restaurant's menu and prices | restaurants,menu | restaurant_id:string!",
		"place_food_order | Order food for delivery from a restaurant | delivery,orders,food | restaurant_id:string!,items:array!,address:string!",
		"track_delivery | Track the courier bringing a food order | delivery,tracking | order_id:string!",
		"cancel_food_order | Cancel a food order before the restaurant accepts it | delivery,orders | order_id:string!",
		"reorder_last_order | Order the same meal as last time | delivery,orders | restaurant_id:string",
		"leave_restaurant_review | Rate and review a restaurant | reviews | restaurant_id:string!,stars:integer!,text:string",
		"book_table | Reserve a table at a restaurant for a number of people | restaurants,reservations | restaurant_id:string!,time:string!,party_size:integer!",
	},
	"music": {
		"search_tracks | Search songs, albums and artists | music,search | query:string!,type:string",
		"play_track | Start playing a song, album or playlist | music,playback | uri:string!,device:string",
		"pause_playback | Pause the music | music,playback | ",
		"skip_to_next | Skip to the next song | music,playback | ",
		"create_playlist | Create a new playlist | music,playlists | name:string!,public:boolean",
		"add_to_playlist | Add songs to a playlist | music,playlists | playlist_id:string!,uris:array!",
		"get_recommendations | Songs recommended from seed artists, tracks or genres | music,discovery | seed_genres:array,seed_artists:array",
		"get_lyrics | Get the lyrics of a song | music,lyrics | artist:string!,title:string!",
		"follow_artist | Follow an artist to hear about new releases | music,artists | artist_id:string!",
		"get_currently_playing | What song is playing right now | music,playback | ",
	},
	"movies": {
		"search_movies | Search films by title, actor or genre | movies,search | query:string!,year:integer",
		"get_movie_details | Plot, cast, runtime and ratings of a film | movies | movie_id:string!",
		"list_showtimes | Cinema showtimes for a movie near you | cinema,showtimes | movie_id:string!,near:string!,date:string",
		"buy_movie_tickets | Buy cinema tickets for a showtime | cinema,tickets | showtime_id:string!,seats:integer!",
		"add_to_watchlist | Save a movie or show to watch later | watchlist | movie_id:string!",
		"get_streaming_availability | Which streaming services have a movie | streaming | movie_id:string!,country:string",
		"rate_movie | Rate a movie you watched | ratings | movie_id:string!,stars:integer!",
		"get_trending_movies | Movies trending this week | movies,trending | ",
	},
	"news": {
		"get_top_headlines | Today's top news headlines by country or category | news,headlines | country:string,category:string",
		"search_news | Search news articles about a topic | news,search | query:string!,from:string",
		"get_article | Get the full text of a news article | news,articles | url:string!",
		"list_sources | List news sources and publishers | news,sources | language:string",
		"summarize_article | Summarize a news article in a few sentences | news,summaries | url:string!,sentences:integer",
		"subscribe_to_topic | Get notified about new articles on a topic | news,alerts | topic:string!",
		"get_trending_topics | Topics trending in the news right now | news,trending | ",
	},
	"finance": {
		"get_stock_quote | Latest share price and change of a stock ticker | stocks,markets,quotes | symbol:string!",
		"get_historical_prices | Daily historical prices of a stock | stocks,history,charts | symbol:string!,from:string!,to:string",
		"get_company_financials | Revenue, earnings and balance sheet of a listed company | stocks,fundamentals | symbol:string!,period:string",
		"convert_currency | Convert an amount from one currency to another at today's rate | currency,exchange,fx | amount:number!,from:string!,to:string!",
		"get_exchange_rates | Exchange rates of a base currency against others | currency,fx | base:string!",
		"get_crypto_price | Price of a cryptocurrency such as Bitcoin | crypto | coin:string!,currency:string",
		"place_stock_order | Buy or sell shares at market or limit price | trading,orders | symbol:string!,side:string!,quantity:number!,limit_price:number",
		"get_portfolio | Holdings, value and gains of the investment portfolio | portfolio,investments | ",
		"list_dividends | Upcoming and past dividend payments of a stock | stocks,dividends | symbol:string!",
		"get_market_news | Financial news about markets and companies | news,markets | symbol:string",
	},
	"banking": {
		"get_account_balance | Balance of your checking and savings accounts | accounts,balance | account:string",
		"list_transactions | Recent card and account transactions | transactions,statements | account:string,from:string,to:string",
		"transfer_money | Move money between your accounts or to another person's account | transfers,payments | from_account:string!,to_account:string!,amount:number!",
		"pay_bill | Pay a utility or credit card bill | bills,payments | payee:string!,amount:number!,date:string",
		"freeze_card | Temporarily block a lost or stolen card | cards,security | card_id:string!",
		"order_new_card | Order a replacement debit card | cards | account:string!,reason:string",
		"download_statement | Download the monthly account statement as PDF | statements | account:string!,month:string!",
		"set_spending_limit | Set a daily spending limit on a card | cards,limits | card_id:string!,limit:number!",
		"dispute_transaction | Dispute a card transaction you do not recognise | transactions,disputes | transaction_id:string!,reason:string!",
	},
	"storage": {
		"upload_file | Upload a file to cloud storage | files,upload | path:string!,content:string!",
		"download_file | Download a file from cloud storage | files,download | path:string!",
		"list_files | List the files and folders in a folder | files,folders | folder:string",
		"delete_file | Delete a file or folder | files | path:string!",
		"share_file | Share a file or folder with people by email, with view or edit rights | files,sharing | path:string!,emails:array!,role:string",
		"create_folder | Create a folder | folders | path:string!",
		"move_file | Move or rename a file | files | from:string!,to:string!",
		"search_files | Find files by name or content | files,search | query:string!",
		"get_file_versions | List previous versions of a file | files,versions | path:string!",
		"restore_deleted_file | Restore a file from the trash | files,trash | path:string!",
	},
	"docs": {
		"create_document | Create a new text document | documents,writing | title:string!,content:string",
		"edit_document | Insert or replace text in a document | documents,editing | document_id:string!,text:string!,position:integer",
		"export_document_as_pdf | Export a document to a PDF file | documents,pdf,export | document_id:string!",
		"share_document | Share a document with collaborators | documents,sharing | document_id:string!,emails:array!,role:string",
		"add_comment | Comment on a passage of a document | documents,comments | document_id:string!,text:string!,quote:string",
		"get_document | Read the contents of a document | documents | document_id:string!",
		"list_recent_documents | Documents you opened recently | documents | limit:integer",
		"translate_document | Translate a whole document into another language | documents,translation | document_id:string!,target_language:string!",
		"summarize_document | Summarize a long document into key points | documents,summaries | document_id:string!",
	},
	"language": {
		"translate_text | Translate text into another language | translation,languages | text:string!,target_language:string!,source_language:string",
		"detect_language | Detect the language a text is written in | languages | text:string!",
		"list_supported_languages | Languages available for translation | languages | ",
		"transliterate_text | Write text in another script, e.g. Cyrillic to Latin | scripts | text:string!,to_script:string!",
		"check_grammar | Find spelling and grammar mistakes in a text | grammar,spelling,writing | text:string!,language:string",
		"get_definition | Dictionary definition of a word | dictionary | word:string!",
		"get_synonyms | Synonyms and antonyms of a word | thesaurus | word:string!",
		"text_to_speech | Turn text into spoken audio | speech,audio | text:string!,voice:string",
		"speech_to_text | Transcribe an audio recording into text | speech,transcription | audio_url:string!,language:string",
	},
	"images": {
		"generate_image | Generate a picture from a text description | images,generation,ai | prompt:string!,size:string",
		"resize_image | Resize an image to a width and height | images,editing | image_url:string!,width:integer!,height:integer!",
		"remove_background | Cut out the subject of a photo and make the background transparent | images,editing | image_url:string!",
		"describe_image | Describe what is in a picture | images,vision | image_url:string!",
		"extract_text_from_image | Read the text in a photo or scanned document (OCR) | images,ocr,scanning | image_url:string!,language:string",
		"detect_faces | Find faces in a photo | images,vision | image_url:string!",
		"convert_image_format | Convert an image to PNG, JPEG or WebP | images,formats | image_url:string!,format:string!",
		"compress_image | Make an image file smaller for the web | images,optimization | image_url:string!,quality:integer",
		"upscale_image | Increase the resolution of a small image | images,editing | image_url:string!,factor:integer",
	},
	"cloud": {
		"list_servers | List virtual machines and their state | servers,compute | region:string",
		"start_server | Start a stopped virtual machine | servers,compute | server_id:string!",
		"stop_server | Shut down a virtual machine | servers,compute | server_id:string!",
		"restart_server | Reboot a virtual machine | servers,compute | server_id:string!",
		"deploy_application | Deploy a new version of a service to an environment | deployments,releases | service:string!,version:string!,environment:string!",
		"rollback_deployment | Roll a service back to its previous version | deployments | service:string!,environment:string!",
		"get_logs | Read the logs of a service or server for a time range | logs,observability | service:string!,since:string,query:string",
		"scale_service | Change the number of instances of a service | scaling | service:string!,replicas:integer!",
		"get_metrics | CPU, memory and request metrics of a service | metrics,monitoring | service:string!,metric:string!,since:string",
		"create_alert_rule | Alert when a metric crosses a threshold | alerts,monitoring | metric:string!,threshold:number!,channel:string",
		"list_incidents | List open production incidents | incidents,on-call | status:string",
	},
	"database": {
		"run_sql_query | Run a read-only SQL query against the analytics database | sql,queries | sql:string!,limit:integer",
		"list_tables | List the tables of a database schema | schema | schema:string",
		"describe_table | Columns, types and indexes of a table | schema | table:string!",
		"create_backup | Take a backup snapshot of the database | backups | label:string",
		"restore_backup | Restore the database from a backup snapshot | backups | backup_id:string!",
		"export_table_to_csv | Export the rows of a table to a CSV file | export,csv | table:string!,where:string",
		"create_index | Create an index on table columns | indexes,performance | table:string!,columns:array!",
		"get_slow_queries | List the slowest queries of the last day | performance | limit:integer",
	},
	"smarthome": {
		"turn_on_lights | Switch lights on in a room, optionally dimmed | lights,home | room:string!,brightness:integer",
		"turn_off_lights | Switch the lights off in a room | lights,home | room:string!",
		"set_thermostat | Set the heating or cooling target temperature | thermostat,heating,home | temperature:number!,room:string",
		"lock_door | Lock a smart door lock | locks,security,home | door:string!",
		"unlock_door | Unlock a smart door lock | locks,home | door:string!",
		"get_camera_snapshot | Take a snapshot from a security camera | cameras,security | camera:string!",
		"arm_security_system | Arm or disarm the alarm system | alarm,security | mode:string!",
		"get_energy_usage | Electricity used by the home today and this month | energy | period:string",
		"start_vacuum | Start the robot vacuum cleaner | cleaning,appliances | rooms:array",
		"set_scene | Activate a lighting scene such as movie night | lights,scenes | scene:string!",
	},
	"health": {
		"log_workout | Log a workout with its type, duration and calories | fitness,workouts | type:string!,minutes:integer!,calories:integer",
		"get_step_count | Steps walked today or on a date | fitness,activity | date:string",
		"log_meal | Log a meal and its calories | nutrition,diet | description:string!,calories:integer",
		"get_sleep_summary | How long and how well you slept | sleep | date:string",
		"set_water_reminder | Remind me to drink water regularly | reminders,hydration | every_minutes:integer!",
		"book_doctor_appointment | Book an appointment with a doctor | appointments,doctors | specialty:string!,date:string!",
		"refill_prescription | Ask the pharmacy to refill a prescription | pharmacy,prescriptions | prescription_id:string!",
		"get_heart_rate | Resting and recent heart rate | fitness,heart | date:string",
	},
	"education": {
		"list_courses | List the courses of a school or catalogue | courses | subject:string",
		"enroll_in_course | Enroll a student in a course | courses,enrollment | course_id:string!,student_id:string!",
		"get_grades | A student's grades in each course | grades | student_id:string!",
		"submit_assignment | Hand in homework for an assignment | assignments,homework | assignment_id:string!,file_url:string!",
		"get_assignment_deadlines | Upcoming homework and assignment due dates | assignments,deadlines | student_id:string!",
		"create_quiz | Create a quiz with questions for a class | quizzes | course_id:string!,questions:array!",
		"grade_submission | Give a grade and feedback on a submitted assignment | grading | submission_id:string!,grade:number!,feedback:string",
	},
	"realestate": {
		"search_listings | Search homes for sale or rent by city, price and bedrooms | listings,homes | city:string!,max_price:number,bedrooms:integer,rent:boolean",
		"get_property_details | Photos, size and history of a property | listings | property_id:string!",
		"estimate_home_value | Estimate what a house is worth | valuation | address:string!",
		"schedule_viewing | Arrange a visit of a property with the agent | viewings,appointments | property_id:string!,time:string!",
		"calculate_mortgage | Monthly mortgage payment for a loan amount, rate and term | mortgages,loans | principal:number!,rate:number!,years:integer!",
		"list_agents | Real estate agents working in an area | agents | city:string!",
	},
	"social": {
		"publish_post | Publish a post to the company's social media accounts | social-media,posts | text:string!,image_url:string,networks:array",
		"schedule_post | Schedule a social media post for later | social-media,scheduling | text:string!,publish_at:string!",
		"get_post_analytics | Likes, shares and reach of a post | social-media,analytics | post_id:string!",
		"reply_to_comment | Reply to a comment on a post | social-media,comments | comment_id:string!,text:string!",
		"list_mentions | Posts that mention the brand | social-media,monitoring | since:string",
		"get_follower_count | Number of followers per network | social-media,audience | ",
		"delete_post | Delete a published post | social-media,posts | post_id:string!",
	},
	"analytics": {
		"get_page_views | Page views of the website over a period | web-analytics,traffic | from:string!,to:string!,path:string",
		"get_top_pages | The most visited pages of the site | web-analytics | from:string!,limit:integer",
		"get_conversion_rate | Share of visitors who converted (signed up or bought) | web-analytics,conversions | goal:string!,from:string!",
		"create_report | Build a custom analytics report | reports | metrics:array!,dimensions:array",
		"track_event | Record a custom analytics event | events,tracking | name:string!,properties:object",
		"get_active_users | Daily and monthly active users | users,engagement | date:string",
		"get_traffic_sources | Where visitors come from: search, social, referrals | web-analytics,traffic | from:string!",
	},
	"shipping": {
		"create_shipping_label | Buy and print a shipping label for a parcel | labels,parcels | from_address:object!,to_address:object!,weight_kg:number!,carrier:string",
		"track_package | Track a parcel by its tracking number | tracking,parcels,delivery | tracking_number:string!,carrier:string",
		"get_shipping_rates | Compare shipping prices of carriers for a parcel | rates,parcels | from_zip:string!,to_zip:string!,weight_kg:number!",
		"schedule_pickup | Have a carrier pick up parcels | pickups | date:string!,address:object!",
		"validate_address | Check that a postal address exists and correct it | addresses | address:object!",
		"cancel_shipment | Cancel a shipment and void its label | parcels | shipment_id:string!",
		"list_shipments | List recent shipments and their status | parcels | status:string",
	},
	"esign": {
		"send_for_signature | Send a contract or document to people to sign electronically | signatures,contracts | document_url:string!,signers:array!",
		"get_signature_status | Who has signed an envelope so far | signatures | envelope_id:string!",
		"download_signed_document | Download the signed contract | signatures,documents | envelope_id:string!",
		"create_template | Save a reusable contract template | templates,contracts | name:string!,document_url:string!",
		"void_envelope | Cancel a signature request | signatures | envelope_id:string!,reason:string!",
	},
	"surveys": {
		"create_survey | Create a survey with questions | surveys,feedback | title:string!,questions:array!",
		"list_responses | List the answers to a survey | surveys,responses | survey_id:string!",
		"close_survey | Stop accepting responses | surveys | survey_id:string!",
		"export_responses | Export survey answers to a spreadsheet | surveys,export | survey_id:string!,format:string",
		"create_form | Create a sign-up or registration form | forms | title:string!,fields:array!",
	},
	"newsletter": {
		"create_campaign | Create an email marketing campaign | email-marketing,campaigns | subject:string!,audience:string!,html:string!",
		"send_campaign | Send or schedule an email campaign | email-marketing,campaigns | campaign_id:string!,send_at:string",
		"add_subscriber | Add a subscriber to a mailing list | subscribers,lists | email:string!,list:string!",
		"unsubscribe_contact | Remove a subscriber from a mailing list | subscribers | email:string!,list:string!",
		"get_campaign_stats | Open rate, click rate and unsubscribes of a sent campaign | email-marketing,analytics | campaign_id:string!",
		"create_audience_segment | Group subscribers by a rule for targeting | segments,audience | name:string!,rule:string!",
	},
}

func main() {
	out := filepath.Join("testdata", "catalog")
	if err := os.MkdirAll(out, 0o755); err != nil {
		panic(err)
	}
	total := 0
	for manual, tools := range domains {
		var list []any
		for _, spec := range tools {
			parts := strings.Split(spec, "|")
			if len(parts) != 4 {
				panic("bad spec: " + spec)
			}
			name := strings.TrimSpace(parts[0])
			props := map[string]any{}
			var required []any
			for _, p := range strings.Split(strings.TrimSpace(parts[3]), ",") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
				pn, pt, _ := strings.Cut(p, ":")
				if strings.HasSuffix(pt, "!") {
					pt = strings.TrimSuffix(pt, "!")
					required = append(required, pn)
				}
				props[pn] = map[string]any{"type": pt}
			}
			inputs := map[string]any{"type": "object", "properties": props}
			if required != nil {
				inputs["required"] = required
			}
			var tags []string
			for _, t := range strings.Split(parts[2], ",") {
				if t = strings.TrimSpace(t); t != "" {
					tags = append(tags, t)
				}
			}
			method := "POST"
			for _, p := range []string{"get_", "list_", "search_", "find_", "estimate_", "track_", "calculate_", "detect_", "describe_", "download_", "export_"} {
				if strings.HasPrefix(name, p) {
					method = "GET"
				}
			}
			list = append(list, map[string]any{
				"name":        name,
				"description": strings.TrimSpace(parts[1]),
				"tags":        tags,
				"inputs":      inputs,
				"outputs":     map[string]any{"type": "object"},
				"tool_call_template": map[string]any{
					"name":               manual,
					"call_template_type": "http",
					"http_method":        method,
					"url":                fmt.Sprintf("https://api.%s.example/v1/%s", manual, name),
					"auth":               map[string]any{"auth_type": "api_key", "api_key": "Bearer ${API_KEY}", "var_name": "Authorization"},
				},
			})
			total++
		}
		raw, err := json.MarshalIndent(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": list}, "", "  ")
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(out, manual+".json"), append(raw, '\n'), 0o644); err != nil {
			panic(err)
		}
	}
	fmt.Printf("%d manuals, %d tools\n", len(domains), total)
}
